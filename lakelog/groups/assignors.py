"""Partition assignment strategies, as pure functions of subscriptions and partition counts.

Run by lakelog's coordinator for HTTP members, where Kafka runs them in the group
leader. Every strategy gives each subscribed partition to exactly one subscribed
member (except partitions withheld for a cooperative hand-over).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from lakelog.errors import InconsistentGroupProtocolError
from lakelog.structs import TopicPartition


@dataclass(frozen=True)
class Subscription:
    """What one member asks for: its topics, and the partitions it owns right now."""

    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()


Assignment = dict[str, list[TopicPartition]]


@dataclass(frozen=True)
class AssignmentResult:
    """The assignment, and whether a follow-up rebalance must hand over withheld partitions."""

    assignment: Assignment
    followup: bool = False
    withheld: frozenset[TopicPartition] = field(default_factory=frozenset)


def _partitions_of(topic: str, partitions: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(partitions.get(topic, 0))]


def _subscribed(subs: Mapping[str, Subscription]) -> dict[str, list[str]]:
    """topic -> sorted members subscribed to it."""
    by_topic: dict[str, list[str]] = {}
    for member in sorted(subs):
        for topic in dict.fromkeys(subs[member].topics):
            by_topic.setdefault(topic, []).append(member)
    return by_topic


def range_assign(subs: Mapping[str, Subscription], partitions: Mapping[str, int]) -> Assignment:
    """Kafka's RangeAssignor: per topic, consecutive ranges; the first members get one extra."""
    result: Assignment = {m: [] for m in subs}
    for topic, members in sorted(_subscribed(subs).items()):
        parts = _partitions_of(topic, partitions)
        per, extra = divmod(len(parts), len(members))
        start = 0
        for i, member in enumerate(members):
            count = per + (1 if i < extra else 0)
            result[member].extend(parts[start : start + count])
            start += count
    return result


def roundrobin_assign(
    subs: Mapping[str, Subscription], partitions: Mapping[str, int]
) -> Assignment:
    """Kafka's RoundRobinAssignor: all partitions in order, dealt to subscribed members in turn."""
    result: Assignment = {m: [] for m in subs}
    members = sorted(subs)
    if not members:
        return result
    by_topic = _subscribed(subs)
    turn = 0
    for topic in sorted(by_topic):
        wanted = set(by_topic[topic])
        for tp in _partitions_of(topic, partitions):
            for step in range(len(members)):
                member = members[(turn + step) % len(members)]
                if member in wanted:
                    result[member].append(tp)
                    turn = (turn + step + 1) % len(members)
                    break
    return result


def sticky_assign(subs: Mapping[str, Subscription], partitions: Mapping[str, int]) -> Assignment:
    """Kafka's StickyAssignor goals: balanced first, then as few moves as possible.

    Valid owned partitions are kept, the rest go to the least-loaded eligible member,
    then partitions move from members holding two more than another (each move lowers
    the sum of squared loads, so it ends): a balanced ``owned`` is returned unchanged.
    """
    by_topic = _subscribed(subs)
    eligible: dict[TopicPartition, list[str]] = {}
    for topic, members in by_topic.items():
        for tp in _partitions_of(topic, partitions):
            eligible[tp] = members
    result: dict[str, set[TopicPartition]] = {m: set() for m in subs}
    claimed: set[TopicPartition] = set()
    for member in sorted(subs):
        for tp in sorted(set(subs[member].owned)):
            if tp not in claimed and member in eligible.get(tp, ()):
                result[member].add(tp)
                claimed.add(tp)
    # Most constrained first, so members with few eligible partitions get theirs.
    for tp in sorted(eligible, key=lambda tp: (len(eligible[tp]), tp)):
        if tp not in claimed:
            target = min(eligible[tp], key=lambda m: (len(result[m]), m))
            result[target].add(tp)
    _balance(result, eligible, claimed)
    return {m: sorted(parts) for m, parts in result.items()}


def _balance(
    result: dict[str, set[TopicPartition]],
    eligible: dict[TopicPartition, list[str]],
    owned: set[TopicPartition],
) -> None:
    """Move partitions to less-loaded members; partitions nobody owned yet move first."""
    moved = True
    while moved:
        moved = False
        for donor in sorted(result, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[donor], key=lambda tp: (tp in owned, tp)):
                takers = [m for m in eligible[tp] if len(result[m]) + 1 < len(result[donor])]
                if takers:
                    taker = min(takers, key=lambda m: (len(result[m]), m))
                    result[donor].discard(tp)
                    result[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def cooperative_sticky_assign(
    subs: Mapping[str, Subscription], partitions: Mapping[str, int]
) -> AssignmentResult:
    """Kafka's CooperativeStickyAssignor: the sticky target, minus partitions still owned elsewhere.

    A partition moving from A to B goes to B only in the follow-up rebalance, after A
    rejoined without it, so no two members ever hold it at once.
    """
    target = sticky_assign(subs, partitions)
    owner: dict[TopicPartition, str] = {}
    for member in sorted(subs):
        for tp in subs[member].owned:
            owner.setdefault(tp, member)
    withheld: set[TopicPartition] = set()
    assignment: Assignment = {}
    for member, parts in target.items():
        keep = []
        for tp in parts:
            previous = owner.get(tp)
            if previous is not None and previous != member and previous in subs:
                withheld.add(tp)
            else:
                keep.append(tp)
        assignment[member] = keep
    return AssignmentResult(assignment, bool(withheld), frozenset(withheld))


Assignor = Callable[[Mapping[str, Subscription], Mapping[str, int]], AssignmentResult]


def _eager(fn: Callable[[Mapping[str, Subscription], Mapping[str, int]], Assignment]) -> Assignor:
    def run(subs: Mapping[str, Subscription], partitions: Mapping[str, int]) -> AssignmentResult:
        return AssignmentResult(fn(subs, partitions))

    return run


ASSIGNORS: dict[str, Assignor] = {
    "range": _eager(range_assign),
    "roundrobin": _eager(roundrobin_assign),
    "sticky": _eager(sticky_assign),
    "cooperative-sticky": cooperative_sticky_assign,
}


def assign(
    strategy: str, subs: Mapping[str, Subscription], partitions: Mapping[str, int]
) -> AssignmentResult:
    try:
        assignor = ASSIGNORS[strategy]
    except KeyError:
        raise InconsistentGroupProtocolError(
            f"unknown assignment strategy {strategy!r}; supported: {', '.join(ASSIGNORS)}"
        ) from None
    return assignor(subs, partitions)


def choose_protocol(member_protocols: Sequence[Sequence[str]]) -> str:
    """The first strategy of the first member that every member supports."""
    if not member_protocols:
        raise InconsistentGroupProtocolError("no members to choose an assignment strategy for")
    common = set(member_protocols[0]).intersection(*map(set, member_protocols[1:]))
    for name in member_protocols[0]:
        if name in common and name in ASSIGNORS:
            return name
    raise InconsistentGroupProtocolError(
        "the members support no common assignment strategy: "
        + "; ".join(",".join(p) for p in member_protocols)
    )
