"""Building REST Proxy v3 resources from lakelog's state (pure: no I/O).

Lakelog's model meets Kafka's here:

* Broker ids are strings in lakelog and integers in Kafka: a broker id that
  is a decimal number is that number, any other id is given a stable number
  derived from it (``server.kafka.cluster.node_id``), the same on every broker
  and over HTTP and Kafka alike.
* Brokers own no partitions: every broker serves every partition from the
  shared storage root, which keeps the copies. The broker answering is the
  leader and only (in-sync) replica of every partition, so a topic's
  replication factor is 1 and no reassignment is ever in progress.
* Group states are Kafka's names in the v3 spelling (``PreparingRebalance``
  is ``PREPARING_REBALANCE``); every group is a CLASSIC group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from lakelog.security.acl import AclBinding
from lakelog.topic_config import CONFIG_DEFS, INTERNAL_TOPICS, TopicConfig
from server.rest_proxy.v3_models import (
    V3Acl,
    V3Broker,
    V3BrokerConfig,
    V3ConfigSynonym,
    V3Consumer,
    V3ConsumerAssignment,
    V3ConsumerGroup,
    V3ConsumerGroupLagSummary,
    V3ConsumerLag,
    V3Partition,
    V3Relationship,
    V3Replica,
    V3Resource,
    V3ResourceMetadata,
    V3Topic,
    V3TopicConfig,
    kind_of,
)
from server.settings import SettingValue

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
R = TypeVar("R", bound=V3Resource)


def v3_group_state(state: str) -> str:
    """``PreparingRebalance`` -> ``PREPARING_REBALANCE`` (Kafka's ConsumerGroupState names)."""
    return _CAMEL.sub("_", state).upper() if state else "UNKNOWN"


def _seg(name: str | int) -> str:
    return quote(str(name), safe="")


@dataclass(frozen=True)
class V3Urls:
    """The URLs and CRNs of one cluster's resources, below ``base`` (the broker's URL)."""

    base: str
    cluster_id: str

    @property
    def cluster(self) -> str:
        return f"{self.base.rstrip('/')}/v3/clusters/{_seg(self.cluster_id)}"

    @property
    def crn(self) -> str:
        return f"crn:///kafka={self.cluster_id}"

    def at(self, *segments: str | int) -> str:
        """The cluster URL with path segments appended (each one quoted)."""
        return "/".join([self.cluster, *(_seg(s) for s in segments)])

    def link(self, *segments: str | int) -> V3Relationship:
        return V3Relationship(related=self.at(*segments))

    def resource(self, model: type[R], crn: str, path: Sequence[str | int], **fields: Any) -> R:
        """A resource of this cluster at ``path``, named ``crn`` below the cluster's CRN."""
        metadata = V3ResourceMetadata(self_=self.at(*path), resource_name=f"{self.crn}/{crn}")
        return model(kind=kind_of(model), metadata=metadata, cluster_id=self.cluster_id, **fields)


# -- topics -------------------------------------------------------------------------------


def topic_data(urls: V3Urls, name: str, partitions: int) -> V3Topic:
    return urls.resource(
        V3Topic,
        f"topic={name}",
        ("topics", name),
        topic_name=name,
        is_internal=name in INTERNAL_TOPICS,
        replication_factor=1,
        partitions_count=partitions,
        partitions=urls.link("topics", name, "partitions"),
        configs=urls.link("topics", name, "configs"),
        partition_reassignments=urls.link("topics", name, "partitions", "-", "reassignment"),
    )


def partition_data(urls: V3Urls, topic: str, partition: int, leader: int) -> V3Partition:
    path = ("topics", topic, "partitions", partition)
    return urls.resource(
        V3Partition,
        f"topic={topic}/partition={partition}",
        path,
        topic_name=topic,
        partition_id=partition,
        leader=urls.link(*path, "replicas", leader),
        replicas=urls.link(*path, "replicas"),
        reassignment=urls.link(*path, "reassignment"),
    )


def replica_data(urls: V3Urls, topic: str, partition: int, broker: int) -> V3Replica:
    path = ("topics", topic, "partitions", partition, "replicas", broker)
    return urls.resource(
        V3Replica,
        f"topic={topic}/partition={partition}/replica={broker}",
        path,
        topic_name=topic,
        partition_id=partition,
        broker_id=broker,
        is_leader=True,
        is_in_sync=True,
        broker=urls.link("brokers", broker),
    )


def topic_config_data(urls: V3Urls, topic: str, config: TopicConfig, name: str) -> V3TopicConfig:
    """One topic config: a topic override (DYNAMIC_TOPIC_CONFIG) or the default."""
    value = config.text(name)
    default = TopicConfig().text(name)
    overridden = name in config.overrides
    synonyms = [V3ConfigSynonym(name=name, value=default, source="DEFAULT_CONFIG")]
    if overridden:
        synonyms.insert(0, V3ConfigSynonym(name=name, value=value, source="DYNAMIC_TOPIC_CONFIG"))
    return urls.resource(
        V3TopicConfig,
        f"topic={topic}/config={name}",
        ("topics", topic, "configs", name),
        topic_name=topic,
        name=name,
        value=value,
        is_default=not overridden,
        is_read_only=False,
        is_sensitive=False,
        source="DYNAMIC_TOPIC_CONFIG" if overridden else "DEFAULT_CONFIG",
        synonyms=synonyms,
    )


def topic_configs(urls: V3Urls, topic: str, config: TopicConfig) -> list[V3TopicConfig]:
    return [topic_config_data(urls, topic, config, name) for name in CONFIG_DEFS]


# -- brokers ------------------------------------------------------------------------------


def broker_data(urls: V3Urls, broker: int, host: str | None, port: int | None) -> V3Broker:
    return urls.resource(
        V3Broker,
        f"broker={broker}",
        ("brokers", broker),
        broker_id=broker,
        host=host,
        port=port,
        configs=urls.link("brokers", broker, "configs"),
        partition_replicas=urls.link("brokers", broker, "partition-replicas"),
    )


def broker_config_data(urls: V3Urls, broker: int, setting: SettingValue) -> V3BrokerConfig:
    """A broker setting: read-only (settings are fixed at start), STATIC unless defaulted."""
    name = setting.name
    source = "DEFAULT_CONFIG" if setting.default else "STATIC_BROKER_CONFIG"
    shown = None if setting.sensitive or setting.value is None else str(setting.value)
    return urls.resource(
        V3BrokerConfig,
        f"broker={broker}/config={name}",
        ("brokers", broker, "configs", name),
        broker_id=broker,
        name=name,
        value=shown,
        is_default=setting.default,
        is_read_only=True,
        is_sensitive=setting.sensitive,
        source=source,
        synonyms=[V3ConfigSynonym(name=name, value=shown, source=source)],
    )


# -- consumer groups ------------------------------------------------------------------------


def group_data(
    urls: V3Urls,
    group: str,
    *,
    state: str,
    protocol: str | None,
    simple: bool,
    coordinator: int,
) -> V3ConsumerGroup:
    path = ("consumer-groups", group)
    return urls.resource(
        V3ConsumerGroup,
        f"consumer-group={group}",
        path,
        consumer_group_id=group,
        is_simple=simple,
        partition_assignor=protocol or "",
        state=v3_group_state(state),
        type="CLASSIC",
        is_mixed_consumer_group=False,
        coordinator=urls.link("brokers", coordinator),
        consumers=urls.link(*path, "consumers"),
        lag_summary=urls.link(*path, "lag-summary"),
    )


def consumer_data(urls: V3Urls, group: str, member: dict[str, Any]) -> V3Consumer:
    member_id = str(member["member_id"])
    path = ("consumer-groups", group, "consumers", member_id)
    return urls.resource(
        V3Consumer,
        f"consumer-group={group}/consumer={member_id}",
        path,
        consumer_group_id=group,
        consumer_id=member_id,
        instance_id=member.get("group_instance_id"),
        client_id=str(member.get("client_id") or ""),
        assignments=urls.link(*path, "assignments"),
    )


def assignment_data(
    urls: V3Urls, group: str, member_id: str, topic: str, partition: int
) -> V3ConsumerAssignment:
    path = ("consumer-groups", group, "consumers", member_id)
    return urls.resource(
        V3ConsumerAssignment,
        f"consumer-group={group}/consumer={member_id}/assignment={topic}/partition={partition}",
        (*path, "assignments", topic, "partitions", partition),
        consumer_group_id=group,
        consumer_id=member_id,
        topic_name=topic,
        partition_id=partition,
        partition=urls.link("topics", topic, "partitions", partition),
        lag=urls.link("consumer-groups", group, "lags", topic, "partitions", partition),
    )


@dataclass(frozen=True)
class PartitionLag:
    """A committed partition of a group: offsets and the member that owns it (if any)."""

    topic: str
    partition: int
    current_offset: int
    log_end_offset: int
    member_id: str
    instance_id: str | None
    client_id: str

    @property
    def lag(self) -> int:
        """Kafka never reports a negative lag (a commit ahead of the log end is lag 0)."""
        return max(self.log_end_offset - self.current_offset, 0)


def lag_data(urls: V3Urls, group: str, row: PartitionLag) -> V3ConsumerLag:
    return urls.resource(
        V3ConsumerLag,
        f"consumer-group={group}/lag={row.topic}/partition={row.partition}",
        ("consumer-groups", group, "lags", row.topic, "partitions", row.partition),
        consumer_group_id=group,
        topic_name=row.topic,
        partition_id=row.partition,
        current_offset=row.current_offset,
        log_end_offset=row.log_end_offset,
        lag=row.lag,
        consumer_id=row.member_id,
        instance_id=row.instance_id,
        client_id=row.client_id,
    )


def lag_summary_data(
    urls: V3Urls, group: str, rows: Sequence[PartitionLag]
) -> V3ConsumerGroupLagSummary | None:
    """The largest and the total lag of a group; None when it has no committed offsets."""
    if not rows:
        return None
    worst = max(rows, key=lambda r: r.lag)  # the first of equal lags, in partition order
    return urls.resource(
        V3ConsumerGroupLagSummary,
        f"consumer-group={group}/lag-summary",
        ("consumer-groups", group, "lag-summary"),
        consumer_group_id=group,
        max_lag_consumer_id=worst.member_id,
        max_lag_instance_id=worst.instance_id,
        max_lag_client_id=worst.client_id,
        max_lag_topic_name=worst.topic,
        max_lag_partition_id=worst.partition,
        max_lag=worst.lag,
        total_lag=sum(r.lag for r in rows),
        max_lag_consumer=urls.link("consumer-groups", group, "consumers", worst.member_id),
        max_lag_partition=urls.link("topics", worst.topic, "partitions", worst.partition),
    )


# -- ACLs ---------------------------------------------------------------------------------


def acl_data(urls: V3Urls, binding: AclBinding) -> V3Acl:
    """An ACL; its ``self`` is the ACL search that finds exactly this binding."""
    fields = binding.to_json()
    return V3Acl(
        kind="KafkaAcl",
        metadata=V3ResourceMetadata(self_=f"{urls.at('acls')}?{urlencode(fields)}"),
        cluster_id=urls.cluster_id,
        **fields,
    )


def acl_list(urls: V3Urls, bindings: Iterable[AclBinding]) -> list[V3Acl]:
    return [acl_data(urls, b) for b in sorted(bindings)]
