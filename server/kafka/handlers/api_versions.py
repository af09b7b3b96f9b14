"""ApiVersions: what this broker speaks."""

from __future__ import annotations

from typing import Any

from server.kafka.apis import api_keys
from server.kafka.context import RequestContext


async def api_versions(ctx: RequestContext, body: Any) -> Any:
    return ctx.response(error_code=0, api_keys=api_keys())
