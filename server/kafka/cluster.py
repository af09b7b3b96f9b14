"""The cluster as Kafka clients see it: node ids, addresses, partition leaders, coordinators.

Any broker appends to any partition, but clients route by leader, so each
partition names a stable one (docs/kafka-protocol.md, "Partition leaders and
many brokers") and a changing broker set causes no NOT_LEADER errors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelog.errors import CoordinatorNotAvailableError
from server.groups.rendezvous import choose_coordinator
from server.kafka.topic_ids import TopicIds
from server.registry import BrokerInfo

if TYPE_CHECKING:
    from server.broker import Broker


INT31_MASK = 0x7FFF_FFFF


def node_id(broker_id: str) -> int:
    """Kafka's int32 node id for a broker id, the same on every broker and front end: the id
    itself when it is a number (Kafka's ``node.id``), else a non-negative hash of it."""
    if broker_id.isascii() and broker_id.isdecimal() and int(broker_id) <= INT31_MASK:
        return int(broker_id)
    return int.from_bytes(hashlib.sha256(broker_id.encode()).digest()[:4], "big") & INT31_MASK


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


def _node(info: BrokerInfo, listener: str) -> Node | None:
    address = info.kafka.get(listener)
    if address is None:
        return None
    host, _, port = address.rpartition(":")
    return Node(node_id(info.broker_id), host.strip("[]"), int(port))


class KafkaCluster:
    """Answers from the broker's view of the registry (re-read once per heartbeat)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.topic_ids = TopicIds(broker)

    @property
    def own_id(self) -> str:
        return self.broker.settings.broker_id

    def _live(self) -> dict[str, BrokerInfo]:
        live = dict(self.broker.groups.live_brokers())
        registry = self.broker.registry
        own = live.get(self.own_id)
        if own is None or own.kafka != registry.kafka_addresses:
            live[self.own_id] = BrokerInfo(
                self.own_id,
                self.broker.settings.url,
                registry.started_ms,
                0,
                dict(registry.kafka_addresses),
            )
        return live

    def nodes(self, listener: str) -> list[Node]:
        """Every live broker reachable on ``listener``, this one first."""
        live = self._live()
        ordered = [live[self.own_id], *(b for k, b in sorted(live.items()) if k != self.own_id)]
        return [n for n in (_node(b, listener) for b in ordered) if n is not None]

    def controller_id(self) -> int:
        """The oldest live broker: clients send controller-only admin requests there."""
        live = self._live()
        oldest = min(live.values(), key=lambda b: (b.started_ms or 2**62, b.broker_id))
        return node_id(oldest.broker_id)

    def leader(self, topic: str, partition: int, listener: str) -> int:
        live = {k: b for k, b in self._live().items() if listener in b.kafka}
        if not live:
            return node_id(self.own_id)
        commit_leader = self.broker.commit_leader(topic)
        if commit_leader is not None and commit_leader in live:
            return node_id(commit_leader)
        return node_id(choose_coordinator(f"{topic}:{partition}", live))

    def coordinator(self, group_id: str, listener: str) -> Node:
        info = self.broker.groups.coordinator_of(group_id)
        if info.broker_id == self.own_id:
            info = self._live()[self.own_id]
        node = _node(info, listener)
        if node is None:
            raise CoordinatorNotAvailableError(
                f"the coordinator of group {group_id!r} ({info.broker_id}) has no "
                f"{listener} Kafka listener",
                group_id=group_id,
            )
        return node
