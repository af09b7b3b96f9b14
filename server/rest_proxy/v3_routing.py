"""What the v3 administration routers (topics, brokers and ACLs, consumer groups) share.

Their router (v3 error answers, the errors every route documents), the path
templates they build on, the cluster check every route starts with, and the
way they answer a resource or a collection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from fastapi.types import DecoratedCallable
from pydantic import BaseModel

from server.broker import Broker
from server.rest_proxy.v3_models import V3_ERRORS, V3Collection, V3CollectionMetadata, kind_of
from server.rest_proxy.v3_records import V3Route, check_cluster
from server.rest_proxy.v3_resources import V3Urls

CLUSTER = "/clusters/{cluster_id}"
PartitionId = Annotated[int, Path(ge=0)]


class V3Router(APIRouter):
    """A v3 administration router: v3 error answers, the errors every route documents."""

    def read(
        self, path: str, model: type[BaseModel], summary: str
    ) -> Callable[[DecoratedCallable], DecoratedCallable]:
        """``GET path``, documented as answering ``model``."""
        return self.get(path, responses={200: {"model": model}}, summary=summary)


def admin_router() -> V3Router:
    return V3Router(prefix="/v3", tags=["REST Proxy v3"], route_class=V3Route, responses=V3_ERRORS)


def urls_of(broker: Broker, cluster_id: str) -> V3Urls:
    """The cluster's URLs (404 unless ``cluster_id`` is this cluster)."""
    check_cluster(broker, cluster_id)
    return V3Urls(broker.settings.url, broker.settings.cluster_id)


def answer(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", by_alias=True, exclude_none=True), status)


def listing(
    urls: V3Urls, model: type[V3Collection], data: Sequence[BaseModel], *path: str | int
) -> JSONResponse:
    """The collection at ``path`` holding ``data``."""
    metadata = V3CollectionMetadata(self_=urls.at(*path))
    return answer(model(**{"kind": kind_of(model), "metadata": metadata, "data": data}))
