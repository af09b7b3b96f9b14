"""ApiVersions: what this broker speaks."""

from __future__ import annotations

from typing import Any

from server.kafka import wire
from server.kafka.apis import API_VERSIONS
from server.kafka.build import build
from server.kafka.context import RequestContext
from server.kafka.dispatch import api_versions_list


async def api_versions(ctx: RequestContext, body: Any) -> Any:
    return build(
        wire.response_schema(API_VERSIONS, ctx.version),
        error_code=0,
        api_keys=api_versions_list(),
        throttle_time=0,
    )
