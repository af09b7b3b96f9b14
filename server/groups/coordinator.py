"""The in-memory coordinator of the groups this broker coordinates.

Each pure ``lakelog.groups.state.Group`` is guarded by an asyncio condition that
wakes the members long-polling in their joins and syncs. A generation is written
with put-if-absent before anyone is told about it: finding it taken means another
coordinator is active, so this one drops the group (NOT_COORDINATOR) and reloads
it from storage on the next request. The Kafka listener's client-assigned groups
share all of it (``join``, then ``sync_assignments``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from lakelog.catalog import Catalog
from lakelog.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InvalidRequestError,
    LakelogError,
    NonEmptyGroupError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from lakelog.groups.client_assigned import (
    ClientAssignedJoinRequest,
    ClientAssignedJoinResult,
    SyncResult,
)
from lakelog.groups.codec import CommittedOffset
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.groups.reset import PartitionPosition, ResetRow, ResetSpec, plan_reset
from lakelog.groups.state import (
    AssignmentMode,
    Group,
    GroupLimits,
    GroupState,
    JoinRequest,
    JoinResult,
    MemberDescription,
)
from lakelog.structs import TopicPartition
from lakelog.topic_log import AppendResult, TopicLog
from server.batcher import ProduceBatcher
from server.groups.consumer_protocol import CONSUMER, assigned_partitions, subscribed_topics
from server.groups.fencing import GenerationStore

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Slack on top of a member's rebalance timeout before its join gives up waiting.
JOIN_GRACE_S = 5.0


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Entry:
    group: Group
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)
    dead: bool = False
    #: Dropped from memory while idle (Empty); unlike ``dead``, not a change of coordinator.
    unloaded: bool = False


@dataclass(frozen=True)
class GroupSnapshot:
    """A consistent copy of a group's membership for describe/list.

    ``members`` is what the HTTP describe shows, ``descriptions`` what Kafka's
    DescribeGroups shows; ``protocol_type`` is empty for a group that never had members.
    """

    group_id: str
    state: str
    protocol: str | None
    generation_id: int
    members: list[dict[str, Any]]
    owners: dict[TopicPartition, str]
    protocol_type: str = ""
    assignment_mode: AssignmentMode | None = None
    leader_id: str | None = None
    descriptions: list[MemberDescription] = field(default_factory=list)


@dataclass(frozen=True)
class OffsetLag:
    tp: TopicPartition
    committed: CommittedOffset
    log_end_offset: int | None
    owner: str | None


class GroupCoordinator:
    def __init__(
        self,
        *,
        catalog: Catalog,
        generations: GenerationStore,
        offsets: OffsetsStore,
        batcher: ProduceBatcher,
        limits: GroupLimits,
        broker_id: str,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.catalog = catalog
        self.generations = generations
        self.offsets = offsets
        self.batcher = batcher
        self.limits = limits
        self.broker_id = broker_id
        self.now = clock
        self._groups: dict[str, _Entry] = {}
        self._loading: dict[str, asyncio.Lock] = {}

    # -- loading and stepping down ----------------------------------------------

    async def _entry(self, group_id: str) -> _Entry:
        entry = self._groups.get(group_id)
        if entry is not None:
            return entry
        lock = self._loading.setdefault(group_id, asyncio.Lock())
        async with lock:
            entry = self._groups.get(group_id)
            if entry is None:
                record = await asyncio.to_thread(self.generations.latest, group_id)
                # Fold the group's offsets partition now, so commits and fetches that
                # follow a takeover only read what is newer.
                await asyncio.to_thread(self.offsets.fetch, group_id)
                if record is None:
                    group = Group(group_id, self.limits)
                else:
                    group = Group.restore(record, self.limits, self.now())
                    log.info(
                        "coordinator %s loaded group %s at generation %d (%d members to rejoin)",
                        self.broker_id,
                        group_id,
                        group.generation_id,
                        len(group.members),
                    )
                entry = self._groups[group_id] = _Entry(group)
        self._loading.pop(group_id, None)
        return entry

    @contextlib.asynccontextmanager
    async def _locked(self, group_id: str) -> AsyncIterator[_Entry]:
        """The group's entry with its lock held; NOT_COORDINATOR if this broker dropped it.

        An entry unloaded while idle (between lookup and locking) is simply
        looked up again: the reloaded group is the same, from storage.
        """
        while True:
            entry = await self._entry(group_id)
            async with entry.cond:
                if not entry.unloaded:
                    self._check_alive(entry)
                    yield entry
                    return

    def _check_alive(self, entry: _Entry) -> None:
        if entry.dead:
            raise NotCoordinatorError(
                f"this broker stopped coordinating group {entry.group.group_id!r}; retry",
                group_id=entry.group.group_id,
            )

    def _drop(self, entry: _Entry, reason: str) -> None:
        log.info(
            "coordinator %s dropped group %s: %s", self.broker_id, entry.group.group_id, reason
        )
        self._forget(entry)

    def _forget(self, entry: _Entry) -> None:
        entry.dead = True
        if self._groups.get(entry.group.group_id) is entry:
            del self._groups[entry.group.group_id]
        entry.cond.notify_all()

    async def drop_groups(self, keep: Callable[[str], bool], reason: str) -> None:
        """Forget the groups ``keep`` rejects (another broker coordinates them now)."""
        for entry in list(self._groups.values()):
            if not keep(entry.group.group_id):
                async with entry.cond:
                    if not entry.dead:
                        self._drop(entry, reason)

    # -- driving rebalances -------------------------------------------------------

    async def tick(self) -> None:
        """Expire sessions and complete due rebalances of every group (the timer loop)."""
        for entry in list(self._groups.values()):
            async with entry.cond:
                if not entry.dead:
                    await self._advance(entry)
                    self._unload_if_idle(entry)

    def _unload_if_idle(self, entry: _Entry) -> None:
        """Forget an Empty group: storage holds all of it, and a request reloads it.

        Keeps memory bounded by the groups with members, not by every group id
        ever asked about.
        """
        group = entry.group
        if group.state is GroupState.EMPTY and not group.members and not group.pending:
            entry.unloaded = True
            self._forget(entry)

    async def _advance(self, entry: _Entry) -> None:
        group = entry.group
        now = self.now()
        if group.expire(now):
            entry.cond.notify_all()
        if not group.ready(now):
            return
        if group.mode is AssignmentMode.CLIENT:
            formed = group.complete_join(now)
            if formed is None:  # written once the leader has synced its assignment
                log.info(
                    "group %s generation %d formed: %d members (%s), leader %s",
                    group.group_id,
                    group.generation_id,
                    len(group.members),
                    group.protocol,
                    group.leader_id,
                )
                entry.cond.notify_all()
                return
            record = formed
        else:
            partitions = await asyncio.to_thread(self._partition_counts, group.topics())
            record = group.complete(partitions)
        await self._make_durable(entry, record, now)

    async def _make_durable(self, entry: _Entry, record: dict[str, Any], now: int) -> None:
        """Write the generation (put-if-absent), then finish it and wake the waiters.

        Another coordinator's file at this generation, or a failed write,
        drops the group here: its waiters get NOT_COORDINATOR.
        """
        group = entry.group
        record["coordinator"] = self.broker_id
        record["timestamp_ms"] = now
        try:
            written = await asyncio.to_thread(self.generations.write, record)
        except (LakelogError, OSError) as exc:
            # The write may or may not have landed: reloading from storage decides.
            log.warning(
                "cannot write generation %d of %s: %s", group.generation_id, group.group_id, exc
            )
            self._drop(entry, f"generation write failed: {exc}")
            return
        if not written:
            self._drop(
                entry, f"generation {group.generation_id} was written by another coordinator"
            )
            return
        group.finish(self.now())
        log.info(
            "group %s generation %d: %s, %d members (%s)",
            group.group_id,
            group.generation_id,
            group.state,
            len(group.members),
            group.protocol,
        )
        entry.cond.notify_all()

    def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        # A topic subscribed before it exists is assigned once it does (next rebalance).
        logs = {topic: self._existing(topic) for topic in topics}
        return {topic: log.num_partitions for topic, log in logs.items() if log is not None}

    def _existing(self, topic: str) -> TopicLog | None:
        """The topic's log, refreshed; None if there is no such topic."""
        try:
            topic_log = self.catalog.topic(topic)
        except UnknownTopicOrPartitionError:
            return None
        topic_log.refresh()
        return topic_log

    # -- membership -----------------------------------------------------------------

    @overload
    async def join(self, group_id: str, member_id: str, request: JoinRequest) -> JoinResult: ...

    @overload
    async def join(
        self, group_id: str, member_id: str, request: ClientAssignedJoinRequest
    ) -> ClientAssignedJoinResult: ...

    async def join(
        self, group_id: str, member_id: str, request: JoinRequest | ClientAssignedJoinRequest
    ) -> JoinResult | ClientAssignedJoinResult:
        """Join and wait until the generation forms (server-assigned: until it is durable).

        A client-assigned member's answer is its JoinGroup response; it must
        then ``sync_assignments``. An unchanged client-assigned rejoin, and a
        static member's rejoin in place (``Group.join``), are answered at once
        from the current generation (Kafka's rules).
        """
        async with self._locked(group_id) as entry:
            group = entry.group
            member_id = group.join(member_id, request, self.now())
            client = isinstance(request, ClientAssignedJoinRequest)
            if group.state is not GroupState.PREPARING_REBALANCE:  # answered from this generation
                return (
                    group.client_join_result(member_id) if client else group.join_result(member_id)
                )
            before = group.generation_id
            entry.cond.notify_all()
            await self._advance(entry)

            def answer() -> JoinResult | ClientAssignedJoinResult | None:
                if member_id not in group.members:
                    if member_id in group.fenced:
                        group.member(member_id)  # FENCED_INSTANCE_ID: replaced meanwhile
                    raise UnknownMemberIdError(
                        f"member {member_id!r} was removed from group {group_id!r} "
                        "during the rebalance; rejoin",
                        group_id=group_id,
                    )
                if group.generation_id <= before:
                    return None
                if client:
                    return group.client_join_result(member_id)
                if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                    return group.join_result(member_id)
                return None

            return await self._wait(
                entry,
                request.rebalance_timeout_ms / 1000,
                answer,
                f"the rebalance of group {group_id!r} did not complete within the "
                "rebalance timeout; rejoin",
            )

    async def _wait(
        self, entry: _Entry, timeout_s: float, answer: Callable[[], T | None], late: str
    ) -> T:
        """Wait for ``answer``, woken by every change to the group; REBALANCE_IN_PROGRESS
        saying ``late`` once the member's ``timeout_s`` (plus a grace) is up."""
        deadline = time.monotonic() + timeout_s + JOIN_GRACE_S
        while True:
            self._check_alive(entry)
            found = answer()
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RebalanceInProgressError(late, group_id=entry.group.group_id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry.cond.wait(), remaining)

    async def sync(self, group_id: str, member_id: str, generation_id: int) -> list[TopicPartition]:
        async with self._locked(group_id) as entry:
            return entry.group.sync(member_id, generation_id)

    async def sync_assignments(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes] | None,
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult:
        """Kafka's SyncGroup for a client-assigned member: its assignment bytes, untouched.

        The leader's ``assignments`` complete the generation (``Group.sync_client``);
        followers pass ``None``. Everyone is answered once the generation is
        written, or told REBALANCE_IN_PROGRESS if a new rebalance starts first.
        """
        async with self._locked(group_id) as entry:
            group = entry.group
            now = self.now()
            record = group.sync_client(
                member_id, generation_id, assignments, now, protocol_type, protocol_name
            )
            if record is not None:
                await self._make_durable(entry, record, now)

            def answer() -> SyncResult | None:
                assignment = group.client_assignment(member_id, generation_id)
                if assignment is None:
                    return None
                assert group.protocol_type is not None and group.protocol is not None
                return SyncResult(generation_id, group.protocol_type, group.protocol, assignment)

            return await self._wait(
                entry,
                group.member(member_id).rebalance_timeout_ms / 1000,
                answer,
                f"the leader of group {group_id!r} did not send the assignment of "
                f"generation {generation_id} in time; rejoin",
            )

    async def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> None:
        async with self._locked(group_id) as entry:
            entry.group.heartbeat(member_id, generation_id, self.now())

    async def leave(self, group_id: str, member_id: str) -> None:
        async with self._locked(group_id) as entry:
            entry.group.leave(member_id, self.now())
            entry.cond.notify_all()
            await self._advance(entry)

    # -- offsets ---------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> None:
        """Store the offsets once the member may commit them; returns when durable."""
        await _durable(await self.queue_commit(group_id, member_id, generation_id, offsets))

    async def queue_commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> asyncio.Future[AppendResult] | None:
        """Check the commit and queue it for the offsets table's next group commit.

        Returns the future of its durable write (None: nothing to store). Commits
        queued one after another land in that order, so a caller that queues its
        next commit only once this returns (a Kafka connection) has its last one win.
        """
        await asyncio.to_thread(self.check_partitions, list(offsets))
        async with self._locked(group_id) as entry:
            entry.group.check_commit(member_id, generation_id)
        return await self._submit(group_id, offsets)

    async def _submit(
        self, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset | None]
    ) -> asyncio.Future[AppendResult] | None:
        """Queue the offsets (None: a tombstone) for the offsets table's next group commit."""
        if not offsets:
            return None
        topic_log, batch = await asyncio.to_thread(
            self.offsets.prepare, group_id, offsets, self.now()
        )
        return await self.batcher.submit(topic_log, batch)

    def check_partitions(self, partitions: list[TopicPartition]) -> None:
        """UNKNOWN_TOPIC_OR_PARTITION for any partition that does not exist (nothing stored)."""
        if len(set(partitions)) != len(partitions):
            raise InvalidRequestError("the same topic partition appears twice in one commit")
        for topic in {tp.topic for tp in partitions}:
            topic_log = self.catalog.topic(topic)
            for tp in partitions:
                if tp.topic == topic:
                    if not 0 <= tp.partition < topic_log.num_partitions:
                        topic_log.refresh()
                    topic_log.check_partition(tp.partition)

    # -- administration ----------------------------------------------------------------

    async def snapshot(self, group_id: str) -> GroupSnapshot:
        async with self._locked(group_id) as entry:
            await self._advance(entry)
            return _snapshot(entry.group, with_members=True)

    def local_groups(self) -> list[GroupSnapshot]:
        """Groups loaded here that ever had members (for listing; no members in the copies)."""
        return [
            _snapshot(entry.group, with_members=False)
            for entry in list(self._groups.values())
            if not entry.dead and (entry.group.generation_id != 0 or entry.group.members)
        ]

    async def member_count(self, group_id: str) -> int:
        entry = self._groups.get(group_id)
        return 0 if entry is None else len(entry.group.members)

    async def delete(self, group_id: str) -> None:
        """Tombstone the group's offsets and forget it; refused while it has members."""
        async with self._locked(group_id) as entry:
            await self._advance(entry)
            group = entry.group
            if group.members:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has {len(group.members)} active members; "
                    "stop them (or wait for their sessions to expire) before deleting it",
                    group_id=group_id,
                )
            deleted = await asyncio.to_thread(self.offsets.delete_group, group_id)
            if deleted == 0 and group.generation_id == 0:
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist", group_id=group_id)
            await asyncio.to_thread(self.generations.delete, group_id)
            group.state = GroupState.DEAD
            self._drop(entry, "deleted")

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LakelogError | None]:
        """Tombstone the group's committed offsets of ``partitions`` (Kafka's OffsetDelete).

        Kafka's rules: a group with no members, generation or offsets is
        GROUP_ID_NOT_FOUND; one with members whose topics cannot be known (not
        Kafka's consumer protocol) is NON_EMPTY_GROUP. Partitions of a topic its
        members subscribe to are GROUP_SUBSCRIBED_TO_TOPIC (their offsets are in
        use); the others answer no error once their tombstones are durable, whether
        an offset was committed or not.
        """
        async with self._locked(group_id) as entry:
            await self._advance(entry)
            group = entry.group
            committed = await asyncio.to_thread(self.offsets.fetch, group_id)
            if not group.members and group.generation_id == 0 and not committed:
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist", group_id=group_id)
            in_use = _subscriptions(group)
            outcome: dict[TopicPartition, LakelogError | None] = {}
            for tp in partitions:
                if in_use is None or tp.topic in in_use:
                    outcome[tp] = GroupSubscribedToTopicError(
                        f"group {group_id!r} has active members subscribed to topic {tp.topic!r}",
                        group_id=group_id,
                    )
                else:
                    outcome[tp] = None
            gone = {tp: None for tp, error in outcome.items() if error is None and tp in committed}
            await _durable(await self._submit(group_id, gone))
        return outcome

    async def reset(
        self,
        group_id: str,
        spec: ResetSpec,
        topics: Mapping[str, list[int] | None],
        all_topics: bool,
        execute: bool,
    ) -> list[ResetRow]:
        """Plan (and with ``execute`` store) new committed offsets; executing needs no members."""
        async with self._locked(group_id) as entry:
            await self._advance(entry)
            if execute and entry.group.members:
                raise NonEmptyGroupError(
                    f"group {group_id!r} has {len(entry.group.members)} active members; offsets "
                    "can only be reset while the group is inactive (a dry run is allowed)",
                    group_id=group_id,
                )
            rows = await asyncio.to_thread(self._plan, group_id, spec, topics, all_topics)
            if execute:
                now = self.now()
                offsets = {r.tp: CommittedOffset(r.new_offset, "", now) for r in rows}
                await _durable(await self._submit(group_id, offsets))
        return rows

    def _plan(
        self,
        group_id: str,
        spec: ResetSpec,
        topics: Mapping[str, list[int] | None],
        all_topics: bool,
    ) -> list[ResetRow]:
        committed = self.offsets.fetch(group_id)
        wanted: dict[str, list[int] | None] = dict(topics)
        if all_topics:
            for tp in committed:
                wanted.setdefault(tp.topic, None)
        positions = []
        by_time: dict[TopicPartition, int | None] = {}
        instant = spec.timestamp_ms(self.now())
        for topic, partitions in sorted(wanted.items()):
            topic_log = self.catalog.topic(topic)
            topic_log.refresh()
            chosen = partitions if partitions else range(topic_log.num_partitions)
            for p in chosen:
                topic_log.check_partition(p)
                tp = TopicPartition(topic, p)
                current = committed.get(tp)
                positions.append(
                    PartitionPosition(
                        tp,
                        topic_log.log_start_offset(p),
                        topic_log.high_watermark(p),
                        current.offset if current is not None else None,
                    )
                )
                if instant is not None:
                    found = topic_log.offset_for_timestamp(p, instant)
                    by_time[tp] = found[0] if found is not None else None
        return plan_reset(spec, positions, by_time)

    def lags(
        self, snapshot: GroupSnapshot, committed: Mapping[TopicPartition, CommittedOffset]
    ) -> list[OffsetLag]:
        """Committed offset, log end and owner of each committed partition (for describe)."""
        rows = []
        logs = {topic: self._existing(topic) for topic in {tp.topic for tp in committed}}
        for tp, value in sorted(committed.items()):
            topic_log = logs[tp.topic]
            end = None
            if topic_log is not None and tp.partition < topic_log.num_partitions:
                end = topic_log.high_watermark(tp.partition)
            rows.append(OffsetLag(tp, value, end, snapshot.owners.get(tp)))
        return rows


def _partitions_of(member: MemberDescription, protocol_type: str | None) -> list[TopicPartition]:
    """What a member holds: the partitions the broker assigned it, or those its group's leader
    assigned it in Kafka's consumer protocol (``consumer_protocol``)."""
    if member.partitions or protocol_type != CONSUMER or not member.assignment:
        return list(member.partitions)
    return assigned_partitions(member.assignment) or []


def _snapshot(group: Group, *, with_members: bool) -> GroupSnapshot:
    described = group.describe() if with_members else []
    return GroupSnapshot(
        group.group_id,
        group.state.value,
        group.protocol,
        group.generation_id,
        [
            {
                "member_id": d.member_id,
                "group_instance_id": d.group_instance_id,
                "client_id": d.client_id,
                "host": d.host,
                "assignment": _partitions_of(d, group.protocol_type),
            }
            for d in described
        ],
        group.owners() if with_members else {},
        protocol_type=group.protocol_type or "",
        assignment_mode=group.mode,
        leader_id=group.leader_id,
        descriptions=described,
    )


def _subscriptions(group: Group) -> set[str] | None:
    """The topics the group's members subscribe to (None: any topic, as far as is known).

    An empty group subscribes to nothing. Server-assigned members name their
    topics; Kafka consumers name them in their protocol metadata, and one whose
    metadata does not decode may consume anything. Members of another protocol
    type leave the group's topics unknowable: NON_EMPTY_GROUP, as in Kafka.
    """
    if not group.members:
        return set()
    if group.mode is AssignmentMode.SERVER:
        return group.topics()
    if group.protocol_type != CONSUMER:
        raise NonEmptyGroupError(
            f"group {group.group_id!r} has active members of protocol type "
            f"{group.protocol_type!r}, whose topics are not known",
            group_id=group.group_id,
        )
    topics: set[str] = set()
    for member in group.describe():
        found = subscribed_topics(member.metadata)
        if found is None:
            return None
        topics |= found
    return topics


async def _durable(future: asyncio.Future[AppendResult] | None) -> None:
    if future is not None:
        await future
