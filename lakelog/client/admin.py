"""The admin client: topics, configs, partitions, offsets and brokers, over any broker.

What the CLI tools use. Calls are retried on retriable errors (with backoff,
up to ``default_api_timeout_ms``) and fail over between brokers like every
client. As in Kafka, a create or delete whose response was lost and that is
retried may report TOPIC_ALREADY_EXISTS or UNKNOWN_TOPIC_OR_PARTITION for
its own earlier success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import httpx

from lakelog.client.connection import Connection
from lakelog.client.offsets import OffsetAndTimestamp, OffsetSpec, list_offset, topic_path
from lakelog.client.retry import Backoff, call_with_retries
from lakelog.client.structs import TopicPartition

D = TypeVar("D")


def _pick(cls: type[D], body: Mapping[str, Any]) -> D:
    """``cls`` from the body's fields it knows, so new response fields do not break old clients."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in body.items() if k in names})


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    log_start_offset: int
    high_watermark: int
    size_bytes: int
    num_segments: int
    num_records: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    source: str
    is_default: bool


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic as a broker describes it (``configs`` holds every config, defaults included)."""

    name: str
    topic_id: str
    table_uri: str
    version: int
    size_bytes: int
    partitions: list[PartitionDescription]
    configs: dict[str, ConfigEntry]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def overrides(self) -> dict[str, str]:
        """Configs set on the topic, as opposed to defaults."""
        return {c.name: c.value for c in self.configs.values() if not c.is_default}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TopicDescription:
        return cls(
            name=body["name"],
            topic_id=body["topic_id"],
            table_uri=body["table_uri"],
            version=int(body["version"]),
            size_bytes=int(body["size_bytes"]),
            partitions=[_pick(PartitionDescription, p) for p in body["partitions"]],
            configs={c["name"]: _pick(ConfigEntry, c) for c in body["configs"]},
        )


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    log_start_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    broker_id: str
    url: str
    started_ms: int
    heartbeat_ms: int


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    brokers: list[BrokerDescription]


class AdminClient:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30_000,
        default_api_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        connection: Connection | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._owns_connection = connection is None
        self._conn = connection or Connection(
            bootstrap_servers, request_timeout_ms=request_timeout_ms, transport=transport
        )
        self._backoff = Backoff(retry_backoff_ms, retry_backoff_max_ms)
        self._api_timeout_ms = default_api_timeout_ms

    @property
    def connection(self) -> Connection:
        return self._conn

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return call_with_retries(
            lambda: self._conn.request(method, path, **kwargs),
            backoff=self._backoff,
            timeout_ms=self._api_timeout_ms,
        )

    # -- topics ----------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        replication_factor: int | None = None,
    ) -> TopicDescription:
        """Create a topic; TOPIC_ALREADY_EXISTS if it exists. Configs are Kafka's names."""
        body: dict[str, Any] = {
            "name": name,
            "partitions": partitions,
            "configs": {k: str(v) for k, v in (configs or {}).items()},
        }
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        return TopicDescription.from_json(self._call("POST", "/v1/topics", json=body).json())

    def list_topics(self) -> list[str]:
        topics: list[str] = self._call("GET", "/v1/topics").json()["topics"]
        return topics

    def describe_topic(self, name: str) -> TopicDescription:
        return TopicDescription.from_json(self._call("GET", topic_path(name)).json())

    def alter_configs(
        self,
        name: str,
        set: Mapping[str, str] | None = None,
        delete: Iterable[str] = (),
    ) -> TopicDescription:
        """Set and remove config overrides in one atomic change (Kafka's incremental alter)."""
        body = {"set": {k: str(v) for k, v in (set or {}).items()}, "delete": list(delete)}
        response = self._call("PATCH", f"{topic_path(name)}/configs", json=body)
        return TopicDescription.from_json(response.json())

    def create_partitions(self, name: str, count: int) -> TopicDescription:
        """Grow the topic to ``count`` partitions in total (never shrinks)."""
        response = self._call("POST", f"{topic_path(name)}/partitions", json={"count": count})
        return TopicDescription.from_json(response.json())

    def delete_topic(self, name: str) -> None:
        self._call("DELETE", topic_path(name))

    # -- offsets ---------------------------------------------------------------

    def list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec]
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Kafka's ListOffsets: per partition, the offset for earliest, latest or a time."""
        return {
            TopicPartition(*tp): self._list_offset(TopicPartition(*tp), s)
            for tp, s in specs.items()
        }

    def _list_offset(self, tp: TopicPartition, spec: OffsetSpec) -> OffsetAndTimestamp:
        return call_with_retries(
            lambda: list_offset(self._conn, tp, spec),
            backoff=self._backoff,
            timeout_ms=self._api_timeout_ms,
        )

    def topic_offsets(self, name: str) -> dict[int, PartitionOffsets]:
        """Log start offset and high watermark of every partition, in one request."""
        body = self._call("GET", f"{topic_path(name)}/offsets").json()
        return {
            int(p["partition"]): PartitionOffsets(
                int(p["log_start_offset"]), int(p["high_watermark"])
            )
            for p in body["partitions"]
        }

    # -- cluster ---------------------------------------------------------------

    def brokers(self) -> ClusterDescription:
        """The live brokers, from the cluster's registry."""
        body = self._call("GET", "/v1/brokers").json()
        return ClusterDescription(
            cluster_id=body["cluster_id"],
            brokers=[_pick(BrokerDescription, b) for b in body["brokers"]],
        )

    def close(self) -> None:
        if self._owns_connection:
            self._conn.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "AdminClient",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "PartitionDescription",
    "PartitionOffsets",
    "TopicDescription",
]
