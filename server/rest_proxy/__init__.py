"""The Kafka REST Proxy compatible APIs (v2 and v3), served beside the native ``/v1`` API.

``v2_*`` and ``v3_*`` are the routers of each API version; ``records_models``
holds the produce and metadata bodies both versions share, ``v3_models`` and
``v3_resources`` the v3 administration resources, and ``consumer_instances``
the v2 consumer instances that live in the broker.
"""
