"""An HTTP request sent to the Kafka port: answered in HTTP, naming the broker's HTTP URL.

Pure. A Kafka frame starts with its size, and the first four bytes of an HTTP
request (``GET /``, ``POST``...) read as a size far above any limit, so the
listener would only close the connection and the HTTP client would retry until
its timeout. Recognised instead, the request gets one HTTP answer (421
Misdirected Request, lakelog's JSON error body) whose ``X-Lakelog-Http-Url``
header lets lakelog's client move to the HTTP port at once.
"""

from __future__ import annotations

import json

from lakelog.client.connection import HTTP_URL_HEADER
from lakelog.errors import InvalidRequestError

#: The first four bytes of the requests HTTP clients send.
HTTP_STARTS = frozenset({b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"PATC", b"OPTI"})
MISDIRECTED = 421


def looks_like_http(prefix: bytes) -> bool:
    return prefix in HTTP_STARTS


def http_refusal(listener: str, http_url: str) -> bytes:
    """The whole HTTP/1.1 answer (the connection closes after it)."""
    message = (
        f"this is lakelog's Kafka listener ({listener}), which speaks the Kafka protocol; "
        f"the broker's HTTP API is at {http_url}"
    )
    body = json.dumps(InvalidRequestError(message, http_url=http_url).to_dict()).encode()
    head = (
        f"HTTP/1.1 {MISDIRECTED} Misdirected Request\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{HTTP_URL_HEADER}: {http_url}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body
