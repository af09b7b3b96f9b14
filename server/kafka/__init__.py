"""The Kafka protocol listener: unmodified Kafka clients on lakelog's brokers.

One more front-end over the broker's append path, fetch path, group
coordinator and security (docs/kafka-protocol.md). ``wire`` frames and
parses requests, ``apis`` lists the supported API versions, ``records``
converts RecordBatch v2 to and from produce/segment rows, ``handlers/``
answers each API, ``connection`` serves one client socket and ``listener``
the configured listeners.
"""
