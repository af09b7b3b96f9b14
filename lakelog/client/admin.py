"""The admin client (what the CLI tools use): topics, configs, offsets, groups, ACLs, quotas.

Retriable errors are retried up to ``default_api_timeout_ms``. As in Kafka, a
retried create or delete whose response was lost may report
TOPIC_ALREADY_EXISTS or UNKNOWN_TOPIC_OR_PARTITION for its own success.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

import httpx

from lakelog.client import group_requests as rq
from lakelog.client.connection import ClientBase, Connection
from lakelog.client.offsets import OffsetAndTimestamp, OffsetSpec, list_offset, topic_path
from lakelog.client.retry import Backoff, Retrying
from lakelog.client.structs import OffsetAndMetadata, TopicPartition
from lakelog.partition_state import PartitionOffsets, PartitionState
from lakelog.security.acl import AclBinding, AclFilter
from lakelog.security.quota import QuotaEntity

D = TypeVar("D")


def _pick(cls: type[D], body: Mapping[str, Any]) -> D:
    """``cls`` from the body's fields it knows, so new response fields do not break old clients."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in body.items() if k in names})


PartitionDescription = PartitionState  # the library's own type, read back from the JSON


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
    #: The broker that commits the topic (``None``: each broker commits its own appends).
    commit_leader: str | None = None
    #: Per partition, the Kafka node id of its leader (``None``: the broker has no Kafka
    #: listener).
    kafka_leaders: list[int] | None = None

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
            commit_leader=body.get("commit_leader"),
            kafka_leaders=body.get("kafka_leaders"),
        )


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


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str
    members: int


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class GroupPartitionOffset:
    """One partition of a described group: committed offset (None if none), log end and lag."""

    topic: str
    partition: int
    offset: int | None
    metadata: str
    log_end_offset: int | None
    lag: int | None
    member_id: str | None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str | None
    generation_id: int | None
    coordinator: BrokerRef | None
    members: list[MemberDescription]
    offsets: list[GroupPartitionOffset]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> GroupDescription:
        coordinator = body.get("coordinator")
        return cls(
            group_id=str(body["group_id"]),
            state=str(body.get("state") or ""),
            protocol=body.get("protocol"),
            generation_id=body.get("generation_id"),
            coordinator=None if not coordinator else _pick(BrokerRef, coordinator),
            members=[
                MemberDescription(
                    member_id=str(m["member_id"]),
                    group_instance_id=m.get("group_instance_id"),
                    client_id=str(m.get("client_id") or ""),
                    host=str(m.get("host") or ""),
                    assignment=[rq.tp_from_json(a) for a in m.get("assignment") or []],
                )
                for m in body.get("members") or []
            ],
            offsets=[
                GroupPartitionOffset(
                    topic=str(o["topic"]),
                    partition=int(o["partition"]),
                    offset=o.get("offset"),
                    metadata=str(o.get("metadata") or ""),
                    log_end_offset=o.get("log_end_offset"),
                    lag=o.get("lag"),
                    member_id=o.get("member_id") or None,
                )
                for o in body.get("offsets") or []
            ],
        )


@dataclass(frozen=True, slots=True)
class BrokerRef:
    broker_id: str
    url: str


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """One row of a reset plan: the committed offset now (None if none) and the new one."""

    topic: str
    partition: int
    current_offset: int | None
    new_offset: int


#: ``to`` of a reset: Kafka's options as a dict, e.g. {"earliest": True}, {"shift_by": -2}.
ResetTo = Mapping[str, Any]


class AdminClient(ClientBase):
    """Topics, configs, partitions, offsets, groups, ACLs and quotas, through any broker."""

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
        super().__init__(bootstrap_servers, connection, request_timeout_ms, transport)
        self._retry = Retrying(
            Backoff(retry_backoff_ms, retry_backoff_max_ms), default_api_timeout_ms
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._retry(lambda: self._conn.request(method, path, **kwargs))

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
            TopicPartition(*tp): list_offset(self._conn, TopicPartition(*tp), s, self._retry)
            for tp, s in specs.items()
        }

    def topic_offsets(self, name: str) -> dict[int, PartitionOffsets]:
        """Log start offset and high watermark of every partition, in one request."""
        body = self._call("GET", f"{topic_path(name)}/offsets").json()
        offsets = [_pick(PartitionOffsets, p) for p in body["partitions"]]
        return {p.partition: p for p in offsets}

    # -- consumer groups ---------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Groups with members on any coordinator, and groups that only have committed offsets."""
        body = self._call("GET", "/v1/groups").json()
        return [
            GroupListing(
                group_id=str(g["group_id"]),
                state=str(g.get("state") or ""),
                protocol_type=str(g.get("protocol_type") or "consumer"),
                members=int(g.get("members") or 0),
            )
            for g in body.get("groups") or []
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        """Members, assignment, committed offsets, log end offsets and lag of one group."""
        return GroupDescription.from_json(self._call("GET", rq.group_path(group_id)).json())

    def delete_group(self, group_id: str) -> None:
        """Delete the group's committed offsets; NON_EMPTY_GROUP while it has members."""
        self._call("DELETE", rq.group_path(group_id))

    def list_group_offsets(
        self, group_id: str, topic: str | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of one topic if given)."""
        return self._retry(lambda: rq.fetch_committed(self._conn, group_id, topic))

    def reset_group_offsets(
        self,
        group_id: str,
        to: ResetTo,
        *,
        topics: Mapping[str, Sequence[int] | None] | None = None,
        all_topics: bool = False,
        execute: bool = False,
    ) -> list[OffsetReset]:
        """Plan (and with ``execute`` apply) a reset, planned by the broker and clamped to the log.

        ``topics`` maps topic -> partitions (None: all); executing fails with
        NON_EMPTY_GROUP while the group has members.
        """
        if not all_topics and not topics:
            raise ValueError("reset_group_offsets needs topics or all_topics=True")
        body = {
            "topics": [
                {"topic": t, "partitions": None if ps is None else list(ps)}
                for t, ps in (topics or {}).items()
            ],
            "all_topics": all_topics,
            "to": dict(to),
            "execute": execute,
        }
        answer = self._call("POST", f"{rq.group_path(group_id)}/offsets:reset", json=body).json()
        return [_pick(OffsetReset, o) for o in answer.get("offsets") or []]

    def group_coordinator(self, group_id: str) -> BrokerRef:
        body = self._call("GET", f"{rq.group_path(group_id)}/coordinator").json()
        return _pick(BrokerRef, body)

    # -- cluster ---------------------------------------------------------------

    def brokers(self) -> ClusterDescription:
        """The live brokers, from the cluster's registry."""
        body = self._call("GET", "/v1/brokers").json()
        return ClusterDescription(
            cluster_id=body["cluster_id"],
            brokers=[_pick(BrokerDescription, b) for b in body["brokers"]],
        )

    # -- ACLs and quotas (docs/security.md) ---------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Add ACL bindings (CLUSTER ALTER needed); returns those that were not there yet."""
        return self._acls("POST", json={"acls": [b.to_json() for b in bindings]})

    def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The stored ACL bindings matching the filter (all without one)."""
        return self._acls("GET", params=asdict(acl_filter or AclFilter()))

    def delete_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """Delete the bindings matching the filter (at least one field set); returns them."""
        return self._acls("DELETE", params=asdict(acl_filter))

    def _acls(self, method: str, **kwargs: Any) -> list[AclBinding]:
        answer = self._call(method, "/v1/acls", **kwargs).json()
        return [AclBinding.from_json(a) for a in answer["acls"]]

    def describe_client_quotas(
        self, user: str | None = None, client_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Quota overrides: ``[{"user", "client_id", "quotas": {name: value}}]``."""
        response = self._call("GET", "/v1/quotas", params={"user": user, "client_id": client_id})
        quotas: list[dict[str, Any]] = response.json()["quotas"]
        return quotas

    def alter_client_quotas(
        self,
        entity: QuotaEntity,
        set: Mapping[str, float] | None = None,
        delete: Iterable[str] = (),
    ) -> dict[str, float]:
        """Set/remove one entity's quotas: producer_byte_rate, consumer_byte_rate, request_rate."""
        body = {
            "entity": {"user": entity.user, "client_id": entity.client_id},
            "set": dict(set or {}),
            "delete": list(delete),
        }
        limits: dict[str, float] = self._call("PATCH", "/v1/quotas", json=body).json()["quotas"]
        return limits


__all__ = [
    "AdminClient",
    "BrokerDescription",
    "BrokerRef",
    "ClusterDescription",
    "ConfigEntry",
    "GroupDescription",
    "GroupListing",
    "GroupPartitionOffset",
    "MemberDescription",
    "OffsetReset",
    "PartitionDescription",
    "PartitionOffsets",
    "TopicDescription",
]
