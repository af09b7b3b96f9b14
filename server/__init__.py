"""lakelog's brokers: the FastAPI app with the native ``/v1`` API, the Confluent REST Proxy
v2/v3 APIs, admin routes and the group coordinator, over the ``lakelog`` library."""
