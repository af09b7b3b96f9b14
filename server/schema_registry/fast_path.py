"""``GET /schemas/ids/{id}`` answered before FastAPI's routing, from memory.

Every Confluent deserializer asks for the schema of each id it has not seen,
so look-ups come in bursts from whole consumer fleets. When the answer was
rendered before (``SchemaRegistry.answers``, filled by the route on its first
answer) and the request has nothing the route would judge (no query string, an
``Accept`` the answer satisfies, no authentication or quota to apply), this
middleware sends it as is; anything else goes on to the route unchanged. It
sits inside the metrics middleware and names the route it stands for, so the
request is counted under that route.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from server.content_negotiation import acceptable
from server.schema_registry.answers import RESPONSE_TYPES, V1_JSON
from server.schema_registry.registry import SchemaRegistry

PREFIX = "/schemas/ids/"
TEMPLATE = PREFIX + "{schema_id}"
_HEADERS = [(b"content-type", V1_JSON.encode())]


class SchemaByIdFastPath:
    def __init__(self, app: ASGIApp, registry: SchemaRegistry) -> None:
        self.app = app
        self.registry = registry
        self._route: object | None = None

    def _cached(self, scope: Scope) -> bytes | None:
        """The rendered answer, if this request may have it without the route."""
        if scope["method"] != "GET" or scope.get("query_string"):
            return None
        digits = scope["path"][len(PREFIX) :]
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 10:
            return None
        schema_id = int(digits)
        memo = self.registry.answers.get(("schemas/ids", schema_id, ""))
        if memo is None or memo[0] is not self.registry.cached_schema(schema_id):
            return None
        security = getattr(scope["app"].state, "security", None)
        if security is not None and (security.enabled or security.quotas.active):
            return None
        for name, value in scope["headers"]:
            if name == b"accept" and not acceptable(value.decode("latin-1"), RESPONSE_TYPES):
                return None
        return memo[1]

    def _route_of(self, scope: Scope) -> object | None:
        if self._route is None:
            for route in scope["app"].routes:
                if getattr(route, "path", None) == TEMPLATE:
                    self._route = route
        return self._route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        body = self._cached(scope)
        if body is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = self._route_of(scope)
        headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
