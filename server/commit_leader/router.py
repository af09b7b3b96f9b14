"""Which broker commits a topic: the live broker with the highest rendezvous score."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from lakelog.append.result import AppendResult
from lakelog.errors import CommitLeaderUnreachableError, LakelogError
from lakelog.produce import PreparedBatch
from server.commit_leader.handoff import HandoffClient
from server.groups.rendezvous import choose_coordinator
from server.metrics import BrokerMetrics
from server.registry import BrokerInfo

log = logging.getLogger(__name__)


def choose_commit_leader(topic: str, broker_ids: Sequence[str]) -> str:
    """The broker id that commits ``topic``; every broker computes the same one.

    The ``topic:`` prefix keeps a topic's key apart from a group id of the same name.
    """
    return choose_coordinator(f"topic:{topic}", broker_ids)


class CommitRouter:
    """Hands a topic's groups to its leader while the broker set has more than one broker.

    ``live`` is the broker's current view of the registry (refreshed every
    heartbeat); views may differ for a heartbeat, which only means a group is
    committed by a broker that is not the leader, as safely as before.
    """

    def __init__(
        self,
        broker_id: str,
        live: Callable[[], Mapping[str, BrokerInfo]],
        client: HandoffClient,
        metrics: BrokerMetrics,
        on_committed: Callable[[str, set[int]], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._live = live
        self._client = client
        self._metrics = metrics
        #: Told of the partitions a leader committed for this broker: this broker's view of
        #: them is stale, and its long polls on them may have records to answer with.
        self._on_committed = on_committed

    def leader_id(self, topic: str) -> str:
        """The broker id that commits ``topic``, as this broker sees the live brokers."""
        live = self._live()
        return choose_commit_leader(topic, list(live)) if live else self.broker_id

    def leader_url(self, topic: str) -> str | None:
        """The commit leader's URL, or None when this broker commits the topic itself."""
        live = self._live()
        if len(live) < 2:
            return None
        leader = choose_commit_leader(topic, list(live))
        return None if leader == self.broker_id else live[leader].url

    async def hand_off(
        self,
        url: str,
        topic: str,
        batches: Sequence[PreparedBatch],
        on_taken: Callable[[], None],
    ) -> list[AppendResult | LakelogError]:
        """The leader's outcome per request; ``CommitLeaderUnreachableError`` if not taken.

        ``on_taken`` runs once the leader has queued the whole group.
        """
        self._metrics.handoffs.labels(topic, "sent").inc()
        try:
            results = await self._client.send(url, topic, batches, on_taken)
        except CommitLeaderUnreachableError:
            self._metrics.handoffs.labels(topic, "fallback").inc()
            raise
        if self._on_committed is not None:
            written = {
                b.partition
                for r in results
                if isinstance(r, AppendResult) and not r.duplicate
                for b in r.batches
            }
            if written:
                self._on_committed(topic, written)
        return results

    async def close(self) -> None:
        await self._client.close()
