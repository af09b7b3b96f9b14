"""The base of every request body of the native API (``/v1``): strict about shape and types.

A field not in the model is refused, and so is type coercion: a number must be
a JSON number (``"partitions": "3"``, ``3.0`` and ``true`` are refused for an
integer), a flag a JSON boolean, a string a JSON string. Kafka's admin
protocol is typed the same way, and a value silently converted could be one
the client never meant. The refusal is INVALID_REQUEST (HTTP 422) naming each field at
fault (``server.http.validation_error``); nothing is stored.

The REST Proxy bodies (``server.rest_proxy.records_models``, the v2 consumer bodies)
keep their own base: they follow what Confluent's proxy accepts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
