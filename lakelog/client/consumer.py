"""The consumer: read partitions from a position, alone (``assign``) or in a group (``subscribe``).

In a group, ``poll`` joins and rejoins as rebalances require, positions start
from the committed offsets (then ``auto_offset_reset``), and offsets are
committed every ``auto_commit_interval_ms``, before a revoke and on ``close``
(at-least-once). Membership lives in ``group_coordinator``; this class owns
what is read and where. Not thread-safe, like Kafka's: positions only advance
over records ``poll`` has returned.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence

import httpx

from lakelog.client.commits import CommitCallback, Committer
from lakelog.client.connection import ClientBase, Connection
from lakelog.client.errors import NoOffsetForPartitionError
from lakelog.client.fetcher import Fetcher
from lakelog.client.group_coordinator import COOPERATIVE, GroupConfig, GroupCoordinator
from lakelog.client.offsets import OffsetAndTimestamp, OffsetSpec, list_offset
from lakelog.client.rebalance import ConsumerRebalanceListener
from lakelog.client.retry import Backoff, Retrying
from lakelog.client.structs import OffsetAndMetadata, TopicPartition
from lakelog.client.subscription import ResetPolicy, SubscriptionState
from lakelog.client.wire import WireFormat
from lakelog.errors import InvalidGroupIdError, LakelogError
from lakelog.records import ConsumerRecord

log = logging.getLogger(__name__)

#: The brokers' default cap on a long poll (``fetch_max_wait_ms`` broker setting).
BROKER_MAX_WAIT_MS = 30_000

Topics = Sequence[str] | re.Pattern[str]


class Consumer(ClientBase):
    """Reads records of assigned partitions, or of the partitions its group gives it.

    ``auto_offset_reset`` decides where a partition without a position (and,
    in a group, without a committed offset) starts, and where a position
    outside the log (OFFSET_OUT_OF_RANGE) goes: ``earliest``, ``latest``
    (Kafka's default), or ``none`` to raise instead. ``fetch_max_wait_ms`` is
    how long one fetch may wait on the broker for records (capped by the
    poll's timeout). ``fetch_format="arrow"`` moves records as Arrow IPC;
    ``"json"`` as base64 JSON.

    Group settings (only with ``group_id``) keep Kafka's names and defaults:
    ``session_timeout_ms``, ``heartbeat_interval_ms``, ``max_poll_interval_ms``,
    ``enable_auto_commit``, ``auto_commit_interval_ms``,
    ``partition_assignment_strategy`` (range, roundrobin, sticky,
    cooperative-sticky), ``group_instance_id`` and ``metadata_max_age_ms``
    (how often a pattern subscription looks for new topics).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        group_id: str | None = None,
        client_id: str = "lakelog-consumer",
        group_instance_id: str | None = None,
        auto_offset_reset: ResetPolicy = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: Sequence[str] = ("range", COOPERATIVE),
        metadata_max_age_ms: int = 300_000,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1 << 20,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30_000,
        default_api_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        fetch_format: WireFormat = "arrow",
        fetch_threads: int = 8,
        connection: Connection | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none: {auto_offset_reset!r}"
            )
        if not 0 <= fetch_max_wait_ms <= BROKER_MAX_WAIT_MS:
            raise ValueError(f"fetch_max_wait_ms must be in 0..{BROKER_MAX_WAIT_MS}")
        if max_poll_records < 1 or max_partition_fetch_bytes < 1:
            raise ValueError("max_poll_records and max_partition_fetch_bytes must be positive")
        if auto_commit_interval_ms <= 0 or metadata_max_age_ms <= 0:
            raise ValueError("auto_commit_interval_ms and metadata_max_age_ms must be positive")
        self._retry = Retrying(
            Backoff(retry_backoff_ms, retry_backoff_max_ms), default_api_timeout_ms
        )
        self._coordinator: GroupCoordinator | None = None
        group: GroupConfig | None = None
        if group_id is not None:
            group = GroupConfig(
                group_id=group_id,
                client_id=client_id,
                group_instance_id=group_instance_id,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                max_poll_interval_ms=max_poll_interval_ms,
                partition_assignment_strategy=tuple(partition_assignment_strategy),
            )
            group.validate()  # before opening anything, so a bad config leaks nothing
        super().__init__(bootstrap_servers, connection, request_timeout_ms, transport)
        if group is not None:
            self._coordinator = GroupCoordinator(self._conn, group, self._retry)
        self._subs = SubscriptionState(auto_offset_reset)
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._max_poll_records = max_poll_records
        self._fetcher = Fetcher(
            self._conn,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            max_records=max_poll_records,
            fetch_format=fetch_format,
            request_timeout_s=request_timeout_ms / 1000,
            backoff=self._retry.backoff,
            threads=fetch_threads,
        )
        self._committer = Committer(self._send_commit)
        self._auto_commit = enable_auto_commit and group_id is not None
        self._auto_commit_interval_s = auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
        self._last_committed: dict[TopicPartition, int] = {}
        self._topics: list[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._pattern_checked = 0.0
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._listener = ConsumerRebalanceListener()
        self._manual = False
        self._closed = False

    @property
    def group_id(self) -> str | None:
        return None if self._coordinator is None else self._coordinator.group_id

    @property
    def member_id(self) -> str | None:
        """This consumer's member id in its group (None outside a generation)."""
        if self._coordinator is None:
            return None
        return self._coordinator.member_id or None

    @property
    def generation_id(self) -> int | None:
        if self._coordinator is None or self._coordinator.generation_id < 0:
            return None
        return self._coordinator.generation_id

    def _group(self, what: str) -> GroupCoordinator:
        if self._coordinator is None:
            raise InvalidGroupIdError(
                f"{what} needs a consumer group: create the Consumer with group_id=..."
            )
        return self._coordinator

    # -- assignment ------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions, without a group; with ``group_id``, commits
        still go to the group (as "simple" commits), like Kafka's."""
        self._check_open()
        if self._subscribed():
            raise RuntimeError(
                "assign() cannot be used while subscribed (call unsubscribe() first): "
                "manual assignment and subscription are mutually exclusive"
            )
        wanted = [_tp(tp) for tp in partitions]
        self._manual = bool(wanted)
        self._set_assignment(wanted)

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        self._subs.assign(partitions)
        kept = set(self._subs.assigned())
        self._fetcher.forget(kept)
        self._last_committed = {tp: o for tp, o in self._last_committed.items() if tp in kept}

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assigned())

    def unassign(self) -> None:
        self.assign([])

    # -- subscription ----------------------------------------------------------

    def subscribe(
        self,
        topics: Topics | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join the group for these topics (a list), or every topic matching a regex.

        Partitions are assigned on the next ``poll``; ``listener`` hears of every
        change. Subscribing again replaces the subscription.
        """
        self._check_open()
        coordinator = self._group("subscribe()")
        if self._manual:
            raise RuntimeError(
                "subscribe() cannot be used after assign() (call unassign() first): "
                "manual assignment and subscription are mutually exclusive"
            )
        if isinstance(topics, re.Pattern):
            pattern, topics = topics, None
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() needs either a list of topics or a pattern")
        if topics is not None:
            if isinstance(topics, str):
                raise ValueError(
                    f"subscribe() takes a list of topics, not the string {topics!r} "
                    "(pass pattern=... for a regex)"
                )
            names = sorted({str(t) for t in topics})
            if not names or any(not n for n in names):
                raise ValueError("subscribe() needs at least one non-empty topic name")
            self._pattern = None
        else:
            assert pattern is not None
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            names = self._matching_topics(self._pattern)
            self._pattern_checked = time.monotonic()
        if names != self._topics:
            self._topics = names
            coordinator.request_rejoin()
        self._listener = listener or ConsumerRebalanceListener()

    def subscription(self) -> set[str]:
        """The topics subscribed to (for a pattern: those it matched last)."""
        return set(self._topics or ())

    def unsubscribe(self) -> None:
        """Give up every partition (committing first if auto-commit is on) and leave the group."""
        self._check_open()
        if self._subscribed():
            coordinator = self._group("unsubscribe()")
            self._revoke(set(self._subs.assigned()), lost=coordinator.take_lost())
            coordinator.leave("unsubscribed")
        self._topics = None
        self._pattern = None
        self._manual = False
        self._set_assignment([])

    def _subscribed(self) -> bool:
        return self._topics is not None

    def _matching_topics(self, pattern: re.Pattern[str]) -> list[str]:
        names: list[str] = self._retry(lambda: self._conn.get_json("/v1/topics")["topics"])
        return sorted(n for n in names if pattern.fullmatch(n) and not n.startswith("_"))

    # -- the group, driven by poll ----------------------------------------------

    def _ensure_group(self) -> None:
        """Rejoin if the coordinator asked for it, the pattern matches new topics, or we left."""
        coordinator = self._coordinator
        if coordinator is None or not self._subscribed():
            return
        coordinator.raise_fatal()
        if (
            self._pattern is not None
            and time.monotonic() - self._pattern_checked >= self._metadata_max_age_s
        ):
            self._pattern_checked = time.monotonic()
            names = self._matching_topics(self._pattern)
            if names != self._topics:
                log.info("pattern %s now matches %s: rejoining", self._pattern.pattern, names)
                self._topics = names
                coordinator.request_rejoin()
        if not coordinator.rejoin_needed():
            return
        owned = set(self._subs.assigned())
        lost = coordinator.take_lost()
        if lost or coordinator.protocol != COOPERATIVE:
            # Eager protocol (and any lost generation): give everything up before joining.
            self._revoke(owned, lost=lost)
            self._set_assignment([])
            owned = set()
        result = coordinator.join(self._topics or [], owned)
        new = set(result.assignment)
        added = new - owned
        revoked = owned - new
        if revoked:  # cooperative: give up only what moved, then rejoin so others get it
            self._revoke(revoked, lost=False)
            coordinator.request_rejoin()
        self._set_assignment(sorted(new))
        log.info(
            "group %s generation %d: member %s assigned %s",
            coordinator.group_id,
            result.generation_id,
            result.member_id,
            sorted(new),
        )
        self._listener.on_partitions_assigned(added)

    def _revoke(self, partitions: set[TopicPartition], *, lost: bool, commit: bool = True) -> None:
        """Commit (at-least-once) and tell the listener, or just tell it the partitions are lost."""
        if not partitions:
            return
        if lost:
            self._listener.on_partitions_lost(partitions)
            return
        if commit and self._auto_commit:
            self._commit_quietly({tp: o for tp, o in self._consumed().items() if tp in partitions})
        self._listener.on_partitions_revoked(partitions)

    def _commit_quietly(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit where failing is survivable (revoke, close): the next owner re-reads instead."""
        try:
            self.commit(offsets)
        except LakelogError as exc:
            log.warning(
                "commit of %d partitions before giving them up failed; records after the last "
                "commit will be delivered again: %s",
                len(offsets),
                exc,
            )

    # -- commits ---------------------------------------------------------------

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(p) for tp, p in self._subs.positions().items()}

    def _send_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Runs on the commit thread; membership is read at send time."""
        coordinator = self._group("commit()")
        coordinator.commit(offsets, in_group=self._subscribed())
        for tp, om in offsets.items():
            self._last_committed[tp] = om.offset

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata] | None = None) -> None:
        """Commit ``offsets`` (default: every assigned partition's position) and wait.

        ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and REBALANCE_IN_PROGRESS mean the
        group moved on (the next poll rejoins); retriable errors were retried.
        """
        self._check_open()
        self._group("commit()")
        self._committer.run_callbacks()
        self._committer.commit_sync(self._consumed() if offsets is None else _checked(offsets))
        self._committer.run_callbacks()

    def commit_async(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs in a later poll or commit."""
        self._check_open()
        self._group("commit_async()")
        chosen = self._consumed() if offsets is None else _checked(offsets)
        self._committer.commit_async(chosen, callback)

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None where nothing is committed)."""
        wanted = [_tp(tp) for tp in partitions]
        found = self._group("committed()").committed(wanted)
        return {tp: found.get(tp) for tp in wanted}

    def _maybe_auto_commit(self) -> None:
        if not self._auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval_s
        coordinator = self._coordinator
        if coordinator is None or (self._subscribed() and not coordinator.in_generation()):
            return
        changed = {
            tp: om
            for tp, om in self._consumed().items()
            if self._last_committed.get(tp) != om.offset
        }
        if changed:
            self._committer.commit_async(changed, None)

    # -- positions -------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read ``tp`` from ``offset`` on the next poll (OFFSET_OUT_OF_RANGE resets it)."""
        self._subs.seek(TopicPartition(*tp), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the log start of these partitions (all assigned if none given), lazily."""
        for tp in partitions or tuple(self._subs.assigned()):
            self._subs.request_reset(TopicPartition(*tp), "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the high watermark of these partitions (all if none given), lazily."""
        for tp in partitions or tuple(self._subs.assigned()):
            self._subs.request_reset(TopicPartition(*tp), "latest")

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (resolving it if needed)."""
        tp = TopicPartition(*tp)
        if self._subs.position(tp) is None:
            self._initialize_positions([tp])
        position = self._subs.position(tp)
        assert position is not None
        return position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark seen in the last fetch of ``tp`` (None before one)."""
        return self._subs.high_watermark(TopicPartition(*tp))

    def _initialize_positions(self, partitions: Iterable[TopicPartition]) -> None:
        """Give partitions a position: committed offset (once per assignment, as in Kafka),
        explicit seek, or the policy."""
        partitions = list(partitions)
        if self._coordinator is not None:
            wanted = [tp for tp in partitions if self._subs.wants_committed(tp)]
            if wanted:
                for tp, om in self._coordinator.committed(wanted).items():
                    self._subs.seek(tp, om.offset)
        for tp in partitions:
            if self._subs.position(tp) is not None:
                continue
            target = self._subs.reset_target(tp)
            if target == "none":
                raise NoOffsetForPartitionError(
                    f"no position for {tp} and auto_offset_reset='none': seek first",
                    topic=tp.topic,
                    partition=tp.partition,
                )
            found = self._list_offset(tp, target)
            self._subs.seek(tp, found.offset)

    def _list_offset(self, tp: TopicPartition, spec: OffsetSpec) -> OffsetAndTimestamp:
        return list_offset(self._conn, tp, spec, self._retry)

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition (assigned or not)."""
        return {tp: self._list_offset(tp, "earliest").offset for tp in map(_tp, partitions)}

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark (offset of the next record written) of each partition."""
        return {tp: self._list_offset(tp, "latest").offset for tp in map(_tp, partitions)}

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp; None where no record is that new."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for tp, ts in timestamps.items():
            found = self._list_offset(_tp(tp), ts)
            out[_tp(tp)] = found if found.timestamp_ms is not None else None
        return out

    # -- pause -----------------------------------------------------------------

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop returning and fetching these partitions until ``resume``; positions stay."""
        for tp in partitions:
            self._subs.pause(_tp(tp))

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._subs.resume(_tp(tp))

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    # -- poll ------------------------------------------------------------------

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned, unpaused partitions; waits up to ``timeout_ms`` for some.

        In a group, also (re)joins, running the listener's callbacks, and
        auto-commits. Raises OFFSET_OUT_OF_RANGE (policy ``none``),
        NoOffsetForPartitionError and non-retriable broker errors.
        """
        self._check_open()
        if self._coordinator is not None:
            self._coordinator.poll_called()
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._committer.run_callbacks()
            self._ensure_group()
            self._maybe_auto_commit()
            self._initialize_positions(self._subs.missing_positions())
            self._fetcher.collect(self._subs)
            records = self._fetcher.drain(self._subs, limit)
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if records:
                self._fetcher.send(self._subs, self._fetch_max_wait_ms)  # prefetch the next
                return records
            self._fetcher.send(self._subs, min(self._fetch_max_wait_ms, max(remaining_ms, 0)))
            if remaining_ms <= 0:
                return {}
            self._fetcher.wait(remaining_ms / 1000)

    # -- lifecycle -------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit is on; ``autocommit=False`` skips it), leave the group
        and stop fetching. Idempotent."""
        if self._closed:
            return
        coordinator = self._coordinator
        try:
            if coordinator is not None:
                self._leave_group(coordinator, autocommit)
        finally:
            self._closed = True
            self._committer.close()
            if coordinator is not None:
                coordinator.close()
            self._fetcher.close()
            super().close()

    def _leave_group(self, coordinator: GroupCoordinator, autocommit: bool) -> None:
        if self._subscribed():
            lost = coordinator.take_lost() or not coordinator.in_generation()
            self._revoke(set(self._subs.assigned()), lost=lost, commit=autocommit)
            coordinator.leave("consumer closed")
        elif autocommit and self._auto_commit and self._consumed():
            self._commit_quietly(self._consumed())
        self._committer.wait(self._retry.timeout_ms / 1000)
        self._committer.run_callbacks()


def _tp(tp: TopicPartition) -> TopicPartition:
    return TopicPartition(*tp)


def _checked(
    offsets: dict[TopicPartition, OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets given by the application, checked: an int is accepted for OffsetAndMetadata."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, om in offsets.items():
        value = OffsetAndMetadata(om) if isinstance(om, int) else om
        if not isinstance(value, OffsetAndMetadata) or value.offset < 0:
            raise ValueError(f"commit offset for {tp} must be >= 0, got {om!r}")
        out[_tp(tp)] = value
    return out


__all__ = ["Consumer"]
