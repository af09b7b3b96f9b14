"""The state machine of one consumer group, with time passed in explicitly.

States as in Kafka (``GroupState``). A group is assigned by the coordinator
(HTTP members, ``JoinRequest``: ``complete`` assigns) or by its members' leader
(Kafka members, ``ClientAssignedJoinRequest``: ``complete_join`` forms the
generation, the leader's ``sync_client`` hands in the assignment bytes), as its
first member decides; a join of the other kind gets INCONSISTENT_GROUP_PROTOCOL.

No I/O and no clock: the coordinator calls ``expire(now)`` and ``ready(now)``, and
makes a generation durable between the record ``complete`` / ``sync_client``
returns and ``finish``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from lakelog.errors import (
    CorruptRecordError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from lakelog.groups.assignors import (
    ASSIGNORS,
    Subscription,
    assign,
    choose_protocol,
)
from lakelog.groups.client_assigned import (
    ClientAssignedJoinRequest,
    ClientAssignedJoinResult,
    MemberMetadata,
    Protocol,
    check_join,
    decode_bytes,
    decode_protocols,
    elect_protocol,
    encode_bytes,
    encode_protocols,
)
from lakelog.groups.ids import new_member_id
from lakelog.structs import TopicPartition

#: How many replaced static member ids a group remembers, to answer them FENCED_INSTANCE_ID.
MAX_FENCED_IDS = 1_000


#: The protocol type a server-assigned group reports (its members are consumers).
SERVER_PROTOCOL_TYPE = "consumer"


class AssignmentMode(enum.StrEnum):
    """Who assigns a group's partitions: the coordinator, or the members' leader."""

    SERVER = "server"
    CLIENT = "client"


class GroupState(enum.StrEnum):
    """Kafka's group states; ``Dead``: deleted, or this coordinator stepped down."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupLimits:
    """Kafka's broker-side group settings (group.min/max.session.timeout.ms, ...)."""

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int | None = None


@dataclass(frozen=True)
class JoinRequest:
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[str, ...]
    topics: tuple[str, ...]
    #: Partitions the member owns now; None or empty: the member's last assignment.
    owned: tuple[TopicPartition, ...] | None = None
    group_instance_id: str | None = None
    host: str = ""
    #: What a ``ClientAssignedJoinRequest`` has too: this member's names and no metadata.
    protocol_type: ClassVar[str] = SERVER_PROTOCOL_TYPE

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return self.protocols

    def metadata(self) -> tuple[Protocol, ...]:
        return ()


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[str, ...]
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] | None
    last_heartbeat_ms: int
    #: Rejoined in the current rebalance (a member waiting in its join is never expired).
    joined: bool = False
    assignment: list[TopicPartition] = field(default_factory=list)
    #: Client-assigned members: each protocol with the member's metadata, preferred first.
    metadata: tuple[Protocol, ...] = ()
    #: Client-assigned members: what the leader assigned, untouched (empty until it has).
    assignment_bytes: bytes = b""

    def protocol_metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for ``protocol`` (empty if it sent none for it)."""
        return next((data for name, data in self.metadata if name == protocol), b"")

    def to_record(self, mode: AssignmentMode | None = AssignmentMode.SERVER) -> dict[str, Any]:
        record: dict[str, Any] = {
            "member_id": self.member_id,
            "client_id": self.client_id,
            "host": self.host,
            "group_instance_id": self.group_instance_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "protocols": list(self.protocols),
            "topics": list(self.topics),
            "assignment": [[tp.topic, tp.partition] for tp in self.assignment],
        }
        if mode is AssignmentMode.CLIENT:
            record["metadata"] = encode_protocols(self.metadata)
            record["assignment_bytes"] = encode_bytes(self.assignment_bytes)
        return record

    @classmethod
    def from_record(cls, obj: Mapping[str, Any], now_ms: int) -> Member:
        member_id = str(obj["member_id"])
        return cls(
            member_id=member_id,
            client_id=str(obj["client_id"]),
            host=str(obj.get("host", "")),
            group_instance_id=obj.get("group_instance_id"),
            session_timeout_ms=int(obj["session_timeout_ms"]),
            rebalance_timeout_ms=int(obj["rebalance_timeout_ms"]),
            protocols=tuple(obj["protocols"]),
            topics=tuple(obj["topics"]),
            owned=None,
            last_heartbeat_ms=now_ms,
            assignment=[TopicPartition(str(t), int(p)) for t, p in obj["assignment"]],
            metadata=decode_protocols(obj.get("metadata", []), member_id),
            assignment_bytes=decode_bytes(
                obj.get("assignment_bytes", ""), f"the assignment of member {member_id!r}"
            ),
        )


@dataclass(frozen=True)
class JoinResult:
    """What one member is told when the rebalance it joined completes."""

    group_id: str
    generation_id: int
    member_id: str
    leader_id: str | None
    protocol: str | None
    members: list[str]
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class MemberDescription:
    """One member as Kafka's DescribeGroups shows it (and the HTTP describe, partitions).

    ``metadata`` (for the current protocol) and ``assignment`` bytes are empty for
    server-assigned members; blanking them while not Stable is the front end's job.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    partitions: tuple[TopicPartition, ...]
    metadata: bytes
    assignment: bytes


class Group:
    """One group's membership, generation and assignment on its coordinator."""

    def __init__(self, group_id: str, limits: GroupLimits, generation_id: int = 0) -> None:
        self.group_id = group_id
        self.limits = limits
        self.state = GroupState.EMPTY
        self.generation_id = generation_id
        self.protocol: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        #: Member ids handed out by MEMBER_ID_REQUIRED, valid until this time.
        self.pending: dict[str, int] = {}
        #: Member ids replaced by a newer member with the same group.instance.id (KIP-345):
        #: their requests get FENCED_INSTANCE_ID rather than UNKNOWN_MEMBER_ID.
        self.fenced: dict[str, str] = {}
        self.rebalance_deadline_ms = 0
        self.delay_until_ms = 0
        #: Set by a cooperative assignment that withheld partitions for a hand-over.
        self.followup = False
        #: Who assigns; None until the first member joins. Kept while the group has members.
        self.mode: AssignmentMode | None = None
        self.protocol_type: str | None = None
        #: Client-assigned: the members of the generation formed last, as its leader is told.
        self.generation_members: tuple[MemberMetadata, ...] = ()
        #: Client-assigned: members of the current generation that have not synced yet,
        #: and when they are removed for it.
        self.awaiting_sync: set[str] = set()
        self.sync_deadline_ms = 0
        #: Static members that replaced an older id of theirs without a rebalance, since
        #: the generation formed: new member id -> the id it replaced.
        self.rejoined_in_place: dict[str, str] = {}

    # -- queries ---------------------------------------------------------------

    def member(self, member_id: str) -> Member:
        try:
            return self.members[member_id]
        except KeyError:
            instance = self.fenced.get(member_id)
            if instance is not None:
                raise FencedInstanceIdError(
                    f"member {member_id!r} of group {self.group_id!r} was replaced by a newer "
                    f"member with group.instance.id {instance!r}; this instance must stop",
                    group_id=self.group_id,
                    member_id=member_id,
                    group_instance_id=instance,
                ) from None
            raise UnknownMemberIdError(
                f"member {member_id!r} is not a member of group {self.group_id!r} "
                f"(generation {self.generation_id}); rejoin",
                group_id=self.group_id,
                member_id=member_id,
            ) from None

    def join_result(self, member_id: str) -> JoinResult:
        member = self.member(member_id)
        return JoinResult(
            self.group_id,
            self.generation_id,
            member_id,
            self.leader_id,
            self.protocol,
            list(self.members),
            list(member.assignment),
        )

    def client_join_result(self, member_id: str) -> ClientAssignedJoinResult:
        """The JoinGroup answer of a member of the client-assigned generation formed last."""
        member = self.member(member_id)
        if self.mode is not AssignmentMode.CLIENT or self.protocol is None:
            raise InconsistentGroupProtocolError(
                f"group {self.group_id!r} is not client-assigned: its members get their "
                "partitions from the coordinator",
                group_id=self.group_id,
            )
        assert self.leader_id is not None and self.protocol_type is not None
        return ClientAssignedJoinResult(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=member.member_id,
            leader_id=self.leader_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol,
            members=self.generation_members if member_id == self.leader_id else (),
            former_member_id=self.rejoined_in_place.get(member_id),
        )

    def owners(self) -> dict[TopicPartition, str]:
        return {tp: m.member_id for m in self.members.values() for tp in m.assignment}

    def describe(self) -> list[MemberDescription]:
        """Every member, in join order, with its metadata for the current protocol."""
        return [
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                host=m.host,
                partitions=tuple(m.assignment),
                metadata=m.protocol_metadata(self.protocol),
                assignment=m.assignment_bytes,
            )
            for m in self.members.values()
        ]

    # -- membership ------------------------------------------------------------

    def join(
        self, member_id: str, request: JoinRequest | ClientAssignedJoinRequest, now_ms: int
    ) -> str:
        """Register a (re)join and return the member's id; the answer comes when the
        rebalance completes.

        An empty member id gets MEMBER_ID_REQUIRED with a fresh id (KIP-394), except
        JoinGroup before v4 and static members. A static member takes the place of the
        one with its instance id, which is fenced (KIP-345), without a rebalance when
        it can (``_rejoin_in_place``). Every other join rebalances, except an unchanged
        rejoin of a client-assigned member (``_unchanged_rejoin``).
        """
        low, high = self.limits.min_session_timeout_ms, self.limits.max_session_timeout_ms
        if not low <= request.session_timeout_ms <= high:
            raise InvalidSessionTimeoutError(
                f"session_timeout_ms {request.session_timeout_ms} is outside the broker's range "
                f"[{low}, {high}] (group.min/max.session.timeout.ms)"
            )
        self._check_protocols(member_id, request)
        rejoining = bool(member_id) and member_id in self.members
        instance = request.group_instance_id
        holders = [m for m in self.members.values() if m.group_instance_id == instance]
        static = holders[0] if instance is not None and holders else None
        if member_id and static is not None and static.member_id != member_id:
            self.member(member_id)  # fenced already, or an unknown id
            raise FencedInstanceIdError(
                f"group.instance.id {request.group_instance_id!r} of group {self.group_id!r} "
                f"belongs to member {static.member_id!r}, not {member_id!r}",
                group_id=self.group_id,
                member_id=member_id,
                group_instance_id=request.group_instance_id,
            )
        if not member_id:
            member_id = new_member_id(request.client_id)
            if static is not None:
                if self._rejoin_in_place(static, member_id, request, now_ms):
                    return member_id
                self._replace(static, member_id)
            else:
                self._check_room()
                if instance is None and (
                    isinstance(request, JoinRequest) or request.require_member_id
                ):
                    self.pending[member_id] = now_ms + request.session_timeout_ms
                    raise MemberIdRequiredError(
                        "first join: join again with the member id in details.member_id",
                        member_id=member_id,
                    )
        elif member_id not in self.members and member_id not in self.pending:
            self.member(member_id)  # raises UNKNOWN_MEMBER_ID
        self.pending.pop(member_id, None)
        previous = self.members.get(member_id)
        client = isinstance(request, ClientAssignedJoinRequest)
        if rejoining and previous is not None and self._unchanged_rejoin(previous, request):
            previous.last_heartbeat_ms = now_ms
            return member_id
        member = Member(
            member_id=member_id,
            client_id=request.client_id,
            host=request.host,
            group_instance_id=request.group_instance_id,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocols=request.protocol_names,
            topics=request.topics,
            owned=request.owned,
            last_heartbeat_ms=now_ms,
            metadata=request.metadata(),
        )
        if previous is not None:  # its assignment stands until the next one
            if client:
                member.assignment_bytes = previous.assignment_bytes
            else:
                member.assignment = previous.assignment
        if not any(m != member_id for m in self.members):
            self.mode = AssignmentMode.CLIENT if client else AssignmentMode.SERVER
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if self.state is not GroupState.PREPARING_REBALANCE:
            self.start_rebalance(now_ms)
        self.members[member_id].joined = True
        return member_id

    def _check_protocols(
        self, member_id: str, request: JoinRequest | ClientAssignedJoinRequest
    ) -> None:
        """INCONSISTENT_GROUP_PROTOCOL unless the join fits the other members' assignment."""
        others = [m.protocols for m in self.members.values() if m.member_id != member_id]
        if isinstance(request, ClientAssignedJoinRequest):
            if others and self.mode is AssignmentMode.SERVER:
                raise InconsistentGroupProtocolError(
                    f"group {self.group_id!r} is assigned by the coordinator (its {len(others)} "
                    "members joined over HTTP); a member that assigns partitions itself "
                    "(Kafka protocol) can join it only once it has no members",
                    group_id=self.group_id,
                )
            check_join(self.group_id, request, self.protocol_type, others)
            return
        if others and self.mode is AssignmentMode.CLIENT:
            raise InconsistentGroupProtocolError(
                f"group {self.group_id!r} is assigned by its members' leader (its "
                f"{len(others)} members joined over the Kafka protocol); a member assigned by "
                "the coordinator (HTTP) can join it only once it has no members",
                group_id=self.group_id,
            )
        if not any(p in ASSIGNORS for p in request.protocols):
            raise InconsistentGroupProtocolError(
                f"none of the assignment strategies {list(request.protocols)} is supported; "
                f"supported: {', '.join(ASSIGNORS)}"
            )
        if others and not set(request.protocols).intersection(*map(set, others)):
            raise InconsistentGroupProtocolError(
                f"assignment strategies {list(request.protocols)} share none with the "
                f"members of group {self.group_id!r}"
            )

    def _unchanged_rejoin(
        self, member: Member, request: JoinRequest | ClientAssignedJoinRequest
    ) -> bool:
        """Same metadata while the generation awaits its syncs, or a follower's while Stable:
        Kafka answers it from the current generation instead of rebalancing."""
        if self.mode is not AssignmentMode.CLIENT or member.metadata != request.metadata():
            return False  # (a member's metadata is never empty: an HTTP join is not unchanged)
        if self.state is GroupState.COMPLETING_REBALANCE:
            return True
        return self.state is GroupState.STABLE and member.member_id != self.leader_id

    def _rejoin_in_place(
        self,
        old: Member,
        member_id: str,
        request: JoinRequest | ClientAssignedJoinRequest,
        now_ms: int,
    ) -> bool:
        """Kafka's static rejoin of a ``Stable`` group: ``member_id`` replaces ``old`` and
        keeps its assignment and the generation, if the group's protocol would stay.

        False (nothing changed) when a rebalance is needed instead: not Stable (the
        leader may be assigning the old id), or the protocol or topics would change.
        """
        client = isinstance(request, ClientAssignedJoinRequest)
        mode = AssignmentMode.CLIENT if client else AssignmentMode.SERVER
        if self.state is not GroupState.STABLE or self.mode is not mode:
            return False
        if request.topics != old.topics:
            return False
        leader_first = sorted(self.members.values(), key=lambda m: m.member_id != self.leader_id)
        preferences = [request.protocol_names if m is old else m.protocols for m in leader_first]
        if (elect_protocol if client else choose_protocol)(preferences) != self.protocol:
            return False
        self._replace(old, member_id)
        member = self.members[member_id]
        member.client_id, member.host = request.client_id, request.host
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.protocols, member.metadata = request.protocol_names, request.metadata()
        member.last_heartbeat_ms = now_ms
        if client:
            self.generation_members = tuple(
                MemberMetadata(
                    member_id, g.group_instance_id, member.protocol_metadata(self.protocol)
                )
                if g.member_id == old.member_id
                else g
                for g in self.generation_members
            )
        self.rejoined_in_place[member_id] = old.member_id
        return True

    def _replace(self, old: Member, member_id: str) -> None:
        """``member_id`` takes ``old``'s place and partitions; ``old``'s id is fenced."""
        assert old.group_instance_id is not None
        del self.members[old.member_id]
        self.fenced[old.member_id] = old.group_instance_id
        while len(self.fenced) > MAX_FENCED_IDS:  # oldest first: only the recent ones still call
            del self.fenced[next(iter(self.fenced))]
        if self.leader_id == old.member_id:
            self.leader_id = member_id
        self.members[member_id] = replace(old, member_id=member_id)

    def _check_room(self) -> None:
        if self.limits.max_size is not None and len(self.members) >= self.limits.max_size:
            raise GroupMaxSizeReachedError(
                f"group {self.group_id!r} has reached its maximum of {self.limits.max_size} members"
            )

    def start_rebalance(self, now_ms: int) -> None:
        was_empty = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        self.followup = False
        self.rejoined_in_place = {}
        for member in self.members.values():
            member.joined = False
            member.last_heartbeat_ms = max(member.last_heartbeat_ms, now_ms)
        self.awaiting_sync = set()
        self.delay_until_ms = now_ms + (self.limits.initial_rebalance_delay_ms if was_empty else 0)
        longest = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline_ms = now_ms + longest

    def heartbeat(self, member_id: str, generation_id: int, now_ms: int) -> None:
        """REBALANCE_IN_PROGRESS while members must rejoin; fine once the generation formed
        (a client-assigned member heartbeats while it waits for its leader's assignment)."""
        self._current(member_id, generation_id).last_heartbeat_ms = now_ms
        assigning = self.state is GroupState.COMPLETING_REBALANCE
        if self.state is not GroupState.STABLE and not (
            assigning and self.mode is AssignmentMode.CLIENT
        ):
            raise self._rebalancing()

    def sync(self, member_id: str, generation_id: int) -> list[TopicPartition]:
        member = self._current(member_id, generation_id, AssignmentMode.SERVER)
        if self.state is not GroupState.STABLE:
            raise self._rebalancing()
        return list(member.assignment)

    def sync_client(
        self,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes] | None,
        now_ms: int,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> dict[str, Any] | None:
        """A SyncGroup of a client-assigned member; the generation's record once the leader's.

        The leader's ``assignments`` (member id -> bytes) are the generation's: a member
        left out gets empty bytes, other ids and a follower's are ignored, as in Kafka.
        The record must be made durable before ``finish``. ``protocol_type`` and
        ``protocol_name`` (SyncGroup v5) must be the group's when given.
        """
        member = self._current(member_id, generation_id, AssignmentMode.CLIENT)
        for given, own, what in (
            (protocol_type, self.protocol_type, "protocol type"),
            (protocol_name, self.protocol, "protocol"),
        ):
            if given is not None and given != own:
                raise InconsistentGroupProtocolError(
                    f"{what} {given!r} is not the {what} {own!r} of group {self.group_id!r}",
                    group_id=self.group_id,
                )
        if self.state is GroupState.PREPARING_REBALANCE:
            raise self._rebalancing()
        member.last_heartbeat_ms = now_ms
        self.awaiting_sync.discard(member_id)
        if self.state is not GroupState.COMPLETING_REBALANCE or member_id != self.leader_id:
            return None
        given_bytes = assignments or {}
        for m in self.members.values():
            m.assignment_bytes = bytes(given_bytes.get(m.member_id, b""))
        return self.record()

    def client_assignment(self, member_id: str, generation_id: int) -> bytes | None:
        """The member's assignment bytes once its leader synced; None while awaited
        (REBALANCE_IN_PROGRESS if a new rebalance started meanwhile)."""
        member = self._current(member_id, generation_id, AssignmentMode.CLIENT)
        if self.state is GroupState.PREPARING_REBALANCE:
            raise self._rebalancing()
        if self.state is GroupState.COMPLETING_REBALANCE:
            return None
        return member.assignment_bytes

    def _rebalancing(self) -> RebalanceInProgressError:
        return RebalanceInProgressError(
            f"group {self.group_id!r} is rebalancing: rejoin", group_id=self.group_id
        )

    def _current(
        self, member_id: str, generation_id: int, mode: AssignmentMode | None = None
    ) -> Member:
        """The member, if the group is assigned by ``mode`` (when given) and
        ``generation_id`` is the current generation."""
        member = self.member(member_id)
        if mode is not None and self.mode is not mode:
            how = {
                AssignmentMode.SERVER: "by the coordinator (HTTP members)",
                AssignmentMode.CLIENT: "by its members' leader (Kafka protocol)",
            }
            raise InconsistentGroupProtocolError(
                f"group {self.group_id!r} is not assigned {how[mode]}",
                group_id=self.group_id,
            )
        if generation_id != self.generation_id:
            raise IllegalGenerationError(
                f"generation {generation_id} of group {self.group_id!r} is not the current "
                f"one ({self.generation_id}); rejoin",
                group_id=self.group_id,
                generation_id=self.generation_id,
            )
        return member

    def leave(self, member_id: str, now_ms: int) -> None:
        if self.pending.pop(member_id, None) is not None:
            return
        self.member(member_id)
        del self.members[member_id]
        self.start_rebalance(now_ms)

    def check_commit(self, member_id: str, generation_id: int) -> None:
        """May this commit be stored? Kafka's rules, including the "simple" admin commit.

        Allowed while the group prepares a rebalance (eager clients commit in
        on_partitions_revoked), not while the new generation is being completed.
        """
        if generation_id < 0 and not member_id:
            if self.members:
                raise UnknownMemberIdError(
                    f"group {self.group_id!r} has active members; only they may commit",
                    group_id=self.group_id,
                )
            return
        self._current(member_id, generation_id)
        if self.state is GroupState.COMPLETING_REBALANCE:
            raise RebalanceInProgressError(
                f"group {self.group_id!r} is completing a rebalance", group_id=self.group_id
            )

    # -- time ------------------------------------------------------------------

    def expire(self, now_ms: int) -> list[str]:
        """Remove members whose session ran out, or that did not sync in time (not one
        waiting in its join, nor one that synced and waits for its leader)."""
        self.pending = {m: until for m, until in self.pending.items() if until >= now_ms}
        waiting = self.state is GroupState.PREPARING_REBALANCE
        completing = self.state is GroupState.COMPLETING_REBALANCE
        gone = []
        if self.awaiting_sync and now_ms > self.sync_deadline_ms:
            gone = [m for m in self.members if m in self.awaiting_sync]
            self.awaiting_sync = set()
        gone += [
            m.member_id
            for m in self.members.values()
            if m.member_id not in gone
            and not (waiting and m.joined)
            and not (
                completing
                and self.mode is AssignmentMode.CLIENT
                and m.member_id not in self.awaiting_sync
            )
            and now_ms - m.last_heartbeat_ms > m.session_timeout_ms
        ]
        for member_id in gone:
            del self.members[member_id]
        if gone and not waiting:
            self.start_rebalance(now_ms)
        return gone

    def ready(self, now_ms: int) -> bool:
        """True when the current rebalance can complete (everyone rejoined, or time is up)."""
        if self.state is not GroupState.PREPARING_REBALANCE or now_ms < self.delay_until_ms:
            return False
        return all(m.joined for m in self.members.values()) or now_ms >= self.rebalance_deadline_ms

    # -- completing a rebalance --------------------------------------------------

    def topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.topics}

    def complete(self, partitions: Mapping[str, int]) -> dict[str, Any]:
        """Drop members that did not rejoin, assign, bump the generation; returns its record
        (``CompletingRebalance`` until ``finish``, once the record is written)."""
        if not self._next_generation():
            return self.record()
        order = list(self.members)
        self.protocol = choose_protocol([self.members[m].protocols for m in order])
        self.leader_id = order[0]
        subs = {
            # An empty or missing owned list falls back to the last assignment: eager
            # clients revoke before rejoining, yet sticky must still know who had what.
            m.member_id: Subscription(m.topics, m.owned or tuple(m.assignment))
            for m in self.members.values()
        }
        result = assign(self.protocol, subs, partitions)
        for member_id, parts in result.assignment.items():
            self.members[member_id].assignment = list(parts)
        self.followup = result.followup
        self.state = GroupState.COMPLETING_REBALANCE
        return self.record()

    def complete_join(self, now_ms: int) -> dict[str, Any] | None:
        """Form the client-assigned generation; its record only if it has no members.

        With members the group awaits the leader's ``sync_client`` (the generation is
        written with its assignment); without, it is written and ``finish`` empties it.
        """
        if not self._next_generation():
            self.generation_members = ()
            return self.record()
        self.state = GroupState.COMPLETING_REBALANCE
        leader = self.leader_id if self.leader_id in self.members else next(iter(self.members))
        others = [m for m in self.members if m != leader]
        self.protocol = elect_protocol([self.members[m].protocols for m in [leader, *others]])
        self.leader_id = leader
        self.generation_members = tuple(
            MemberMetadata(m.member_id, m.group_instance_id, m.protocol_metadata(self.protocol))
            for m in self.members.values()
        )
        for member in self.members.values():
            member.assignment_bytes = b""
            member.last_heartbeat_ms = now_ms
        self.awaiting_sync = set(self.members)
        longest = max(m.rebalance_timeout_ms for m in self.members.values())
        self.sync_deadline_ms = now_ms + longest
        return None

    def _next_generation(self) -> bool:
        """Drop the members that did not rejoin and start the next generation; any left?"""
        for member_id in [m for m, member in self.members.items() if not member.joined]:
            del self.members[member_id]
        self.generation_id += 1
        if self.members:
            return True
        self.protocol = self.leader_id = None
        self.state = GroupState.COMPLETING_REBALANCE
        return False

    def finish(self, now_ms: int) -> None:
        """The generation is durable: Stable or Empty (a cooperative hand-over rebalances again)."""
        for member in self.members.values():
            member.last_heartbeat_ms = now_ms
            member.owned = None
        if not self.members:
            self.state = GroupState.EMPTY
            return
        self.state = GroupState.STABLE
        if self.followup:
            self.start_rebalance(now_ms)

    def record(self) -> dict[str, Any]:
        """The JSON stored as ``_meta/groups/<group>/<generation>.json``."""
        return {
            "group_id": self.group_id,
            "generation_id": self.generation_id,
            "assignment_mode": None if self.mode is None else self.mode.value,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "leader_id": self.leader_id,
            "members": [m.to_record(self.mode) for m in self.members.values()],
            "fenced": dict(self.fenced),
        }

    @classmethod
    def restore(cls, record: Mapping[str, Any], limits: GroupLimits, now_ms: int) -> Group:
        """A new coordinator's view of a group from its last durable generation.

        Members are kept (they rejoin with their ids and keep sticky ownership) but must
        rejoin within their session timeout: the group starts a rebalance. A
        client-assigned group keeps its protocol, leader and members' bytes, so
        describing it shows the last durable generation.
        """
        group = cls(str(record["group_id"]), limits, int(record["generation_id"]))
        group.protocol = record.get("protocol")
        group.leader_id = record.get("leader_id")
        for obj in record.get("members", []):
            member = Member.from_record(obj, now_ms)
            group.members[member.member_id] = member
        mode = record.get("assignment_mode")
        if mode is not None:
            try:
                group.mode = AssignmentMode(mode)
            except ValueError:
                raise CorruptRecordError(
                    f"generation {group.generation_id} of group {group.group_id!r} has an "
                    f"unknown assignment_mode {mode!r}"
                ) from None
            group.protocol_type = record.get("protocol_type")
        elif group.members:  # written before groups could be client-assigned
            group.mode, group.protocol_type = AssignmentMode.SERVER, SERVER_PROTOCOL_TYPE
        group.fenced = {str(m): str(i) for m, i in record.get("fenced", {}).items()}
        if group.members:
            group.state = GroupState.STABLE
            group.start_rebalance(now_ms)
        return group
