"""The Kafka protocol listener: unmodified Kafka clients on lakelog's brokers.

See docs/kafka-protocol.md. ``wire`` frames requests, ``apis`` lists the
supported versions, ``records`` converts RecordBatch v2, ``handlers/`` answers
each API, ``connection`` serves one socket and ``listener`` the listeners.
"""
