"""Relaying a group request to its coordinator over HTTP.

The request goes out unchanged plus ``X-Lakelog-Forwarded: <this broker>``,
which tells the receiver to answer NOT_COORDINATOR rather than forward again,
so a disagreement about the coordinator (registry views differ for up to one
heartbeat) can never loop.
"""

from __future__ import annotations

import ssl

import httpx
from fastapi import Request
from fastapi.responses import Response

from lakelog.errors import CoordinatorNotAvailableError

FORWARDED_HEADER = "X-Lakelog-Forwarded"
#: The original client's address, so the coordinator reports members' real hosts.
CLIENT_HOST_HEADER = "X-Lakelog-Client-Host"
#: The ACL version the relaying broker authorized the request with; the receiver
#: reads ACLs at least that new before it authorizes.
ACL_VERSION_HEADER = "X-Lakelog-Acl-Version"
_PASSED_HEADERS = ("content-type", "accept", "authorization", "x-api-key", "x-lakelog-client-id")


def acl_version_headers(request: Request) -> dict[str, str]:
    """The relay headers that carry this broker's ACL version (none with authentication off)."""
    security = getattr(request.app.state, "security", None)
    if security is None or not security.enabled:
        return {}
    return {ACL_VERSION_HEADER: str(security.acl_version)}


class Forwarder:
    """Relays requests to other brokers; ``verify`` is ``server.peer_tls``'s TLS context."""

    def __init__(
        self, broker_id: str, timeout_s: float, verify: ssl.SSLContext | bool = True
    ) -> None:
        self.broker_id = broker_id
        self.timeout_s = timeout_s
        self.verify = verify
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=5.0), verify=self.verify
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def forward(
        self, request: Request, url: str, read_timeout_s: float | None = None
    ) -> Response:
        """Send the request to the broker at ``url``; relay its status and body."""
        headers = {k: v for k, v in request.headers.items() if k.lower() in _PASSED_HEADERS}
        headers[FORWARDED_HEADER] = self.broker_id
        headers.update(acl_version_headers(request))
        if request.client is not None:
            headers[CLIENT_HOST_HEADER] = request.client.host
        target = url.rstrip("/") + request.url.path
        timeout = httpx.Timeout(read_timeout_s or self.timeout_s, connect=5.0)
        try:
            answer = await self.client().request(
                request.method,
                target,
                params=list(request.query_params.multi_items()),
                content=await request.body(),
                headers=headers,
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            raise CoordinatorNotAvailableError(
                f"the coordinator at {url} cannot be reached ({type(exc).__name__}: {exc}); "
                "retry after a backoff",
                coordinator_url=url,
            ) from exc
        kept = {
            k: v for k, v in answer.headers.items() if k.lower() in ("content-type", "retry-after")
        }
        return Response(answer.content, status_code=answer.status_code, headers=kept)
