"""A Schema Registry served by every broker, speaking Confluent's REST API.

Its state is a log of changes in the storage root, so brokers stay stateless and
any broker answers for all of them. The formats (Avro, JSON Schema, Protobuf)
parse, check compatibility and decode payloads through maintained libraries.
"""
