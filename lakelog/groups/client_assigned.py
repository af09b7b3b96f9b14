"""Client-assigned groups: what Kafka-protocol members send and get, as pure values and rules.

A Kafka client assigns in its group leader: each member names the protocols it
supports with opaque metadata; the coordinator chooses a protocol all support,
hands the leader every member's metadata and passes the leader's assignment
bytes on untouched. No bytes are ever decoded here.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from lakelog.errors import CorruptRecordError, InconsistentGroupProtocolError
from lakelog.structs import TopicPartition

#: One entry of a JoinGroup's protocol list: (protocol name, the member's metadata for it).
Protocol = tuple[str, bytes]


@dataclass(frozen=True)
class ClientAssignedJoinRequest:
    """A Kafka JoinGroup, as the coordinator needs it (``protocols`` preferred first).

    ``require_member_id`` (JoinGroup v4+): a dynamic member's first join gets
    MEMBER_ID_REQUIRED; older versions get their id in the join answer at once.
    """

    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    group_instance_id: str | None = None
    host: str = ""
    require_member_id: bool = True
    #: What a server-assigned ``JoinRequest`` has too: the subscription is in the metadata.
    topics: ClassVar[tuple[str, ...]] = ()
    owned: ClassVar[tuple[TopicPartition, ...] | None] = None

    @property
    def protocol_names(self) -> tuple[str, ...]:
        """Protocol names, preferred first, each once (a repeated name keeps its first metadata)."""
        return tuple(name for name, _ in self.metadata())

    def metadata(self) -> tuple[Protocol, ...]:
        """The protocols with their metadata, each name once (the first wins, as in Kafka)."""
        first: dict[str, bytes] = {}
        for name, data in self.protocols:
            first.setdefault(name, bytes(data))
        return tuple(first.items())


@dataclass(frozen=True)
class MemberMetadata:
    """One member of a generation as its leader sees it: metadata of the chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class ClientAssignedJoinResult:
    """The JoinGroup answer of one member of a client-assigned generation.

    ``members`` (with their metadata for ``protocol_name``) only for the leader, as
    in Kafka. ``former_member_id``: a static member replaced its older id without a
    rebalance, so a leader keeps the assignment (KIP-814's ``SkipAssignment``).
    """

    group_id: str
    generation_id: int
    member_id: str
    leader_id: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberMetadata, ...]
    former_member_id: str | None = None

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


@dataclass(frozen=True)
class SyncResult:
    """A SyncGroup answer: the member's assignment bytes, exactly as its leader sent them."""

    generation_id: int
    protocol_type: str
    protocol_name: str
    assignment: bytes


def check_join(
    group_id: str,
    request: ClientAssignedJoinRequest,
    protocol_type: str | None,
    others: Sequence[Sequence[str]],
) -> None:
    """INCONSISTENT_GROUP_PROTOCOL unless the join can share a generation with ``others``
    (the protocol names of each other member; the group's is ``protocol_type``)."""
    if not request.protocol_type:
        raise InconsistentGroupProtocolError(
            f"a join of group {group_id!r} must name a protocol type (e.g. 'consumer')"
        )
    if not request.protocols:
        raise InconsistentGroupProtocolError(
            f"a join of group {group_id!r} must name at least one assignment protocol"
        )
    if not others:
        return
    if request.protocol_type != protocol_type:
        raise InconsistentGroupProtocolError(
            f"protocol type {request.protocol_type!r} differs from {protocol_type!r}, "
            f"the protocol type of the members of group {group_id!r}"
        )
    names = set(request.protocol_names)
    if not names.intersection(*map(set, others)):
        raise InconsistentGroupProtocolError(
            f"assignment protocols {list(request.protocol_names)} share none with the "
            f"members of group {group_id!r}"
        )


def elect_protocol(preferences: Sequence[Sequence[str]]) -> str:
    """The protocol of a generation: Kafka's vote among the protocols every member supports.

    Each member votes for its first common protocol; a tie goes to the leader's
    (``preferences[0]``) preference, so every coordinator chooses the same.
    """
    if not preferences:
        raise InconsistentGroupProtocolError("no members to choose an assignment protocol for")
    common = set(preferences[0]).intersection(*map(set, preferences[1:]))
    if not common:
        raise InconsistentGroupProtocolError(
            "the members support no common assignment protocol: "
            + "; ".join(",".join(p) for p in preferences)
        )
    votes = dict.fromkeys((p for p in preferences[0] if p in common), 0)
    for names in preferences:
        votes[next(p for p in names if p in common)] += 1
    return max(votes, key=lambda name: votes[name])  # max keeps the first of equals


def encode_bytes(data: bytes) -> str:
    """Opaque bytes in a JSON record (the generation file)."""
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise CorruptRecordError(f"{what} in a group generation record is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CorruptRecordError(
            f"{what} in a group generation record is not base64: {exc}"
        ) from exc


def encode_protocols(protocols: Sequence[Protocol]) -> list[list[str]]:
    return [[name, encode_bytes(data)] for name, data in protocols]


def decode_protocols(obj: Any, member_id: str) -> tuple[Protocol, ...]:
    if not isinstance(obj, list):
        raise CorruptRecordError(
            f"protocol metadata of member {member_id!r} in a group generation record is not a list"
        )
    found = []
    for entry in obj:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
            raise CorruptRecordError(
                f"protocol metadata of member {member_id!r} in a group generation record "
                "is not a list of [name, base64] pairs"
            )
        found.append((entry[0], decode_bytes(entry[1], f"metadata of member {member_id!r}")))
    return tuple(found)
