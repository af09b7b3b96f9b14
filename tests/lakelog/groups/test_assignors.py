"""The assignment strategies: Kafka's invariants for any subscriptions, and known examples."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.errors import InconsistentGroupProtocolError
from lakelog.groups.assignors import (
    ASSIGNORS,
    Subscription,
    assign,
    choose_protocol,
    cooperative_sticky_assign,
    range_assign,
    roundrobin_assign,
    sticky_assign,
)
from lakelog.structs import TopicPartition

TOPICS = ["a", "b", "c"]
partition_counts = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
member_ids = st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=8, unique=True)


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, Subscription], dict[str, int]]:
    partitions = draw(partition_counts)
    members = draw(member_ids)
    all_tps = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)]
    subs = {}
    for m in members:
        topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
        owned = draw(st.lists(st.sampled_from(all_tps), unique=True)) if all_tps else []
        subs[m] = Subscription(tuple(topics), tuple(owned))
    return subs, partitions


def expected_partitions(
    subs: dict[str, Subscription], partitions: dict[str, int]
) -> set[TopicPartition]:
    wanted = {t for s in subs.values() for t in s.topics}
    return {TopicPartition(t, p) for t in wanted for p in range(partitions.get(t, 0))}


@settings(max_examples=150, deadline=None)
@given(groups(), st.sampled_from(sorted(ASSIGNORS)))
def test_each_partition_has_at_most_one_subscribed_owner(
    group: tuple[dict[str, Subscription], dict[str, int]], strategy: str
) -> None:
    subs, partitions = group
    result = assign(strategy, subs, partitions)
    assert set(result.assignment) == set(subs)
    counts = Counter(tp for parts in result.assignment.values() for tp in parts)
    assert all(n == 1 for n in counts.values())
    for member, parts in result.assignment.items():
        assert all(tp.topic in subs[member].topics for tp in parts)
    assigned = set(counts)
    # Everything is assigned, except partitions a cooperative hand-over withholds.
    assert assigned | result.withheld == expected_partitions(subs, partitions)
    assert not assigned & result.withheld
    assert result.followup == bool(result.withheld)


@settings(max_examples=100, deadline=None)
@given(partition_counts, member_ids, st.sampled_from(["roundrobin", "sticky"]))
def test_same_subscriptions_are_balanced(
    partitions: dict[str, int], members: list[str], strategy: str
) -> None:
    subs = {m: Subscription(tuple(partitions)) for m in members}
    loads = [len(p) for p in assign(strategy, subs, partitions).assignment.values()]
    assert max(loads) - min(loads) <= 1


@settings(max_examples=100, deadline=None)
@given(partition_counts, member_ids, st.text("xyz", min_size=1, max_size=2))
def test_sticky_keeps_owners_when_a_member_joins_or_leaves(
    partitions: dict[str, int], members: list[str], newcomer: str
) -> None:
    topics = tuple(partitions)
    before = sticky_assign({m: Subscription(topics) for m in members}, partitions)
    total = sum(partitions.values())
    joined = {m: Subscription(topics, tuple(before[m])) for m in members}
    joined[newcomer] = Subscription(topics)
    after = sticky_assign(joined, partitions)
    floor = total // len(joined)
    for m in members:
        kept = set(before[m]) & set(after[m])
        assert len(kept) >= min(len(before[m]), floor)
    if len(members) > 1:
        rest = {m: Subscription(topics, tuple(before[m])) for m in members[1:]}
        shrunk = sticky_assign(rest, partitions)
        for m in members[1:]:
            assert set(before[m]) <= set(shrunk[m])


def rounds_to_converge(
    subs: dict[str, Subscription], partitions: dict[str, int]
) -> tuple[int, dict[str, list[TopicPartition]]]:
    """Run cooperative rebalances, each member reporting what it got, until no follow-up."""
    for rounds in range(1, 10):
        result = cooperative_sticky_assign(subs, partitions)
        for m in subs:  # the same member is never handed a partition someone else still owns
            others = {tp for o, s in subs.items() if o != m for tp in s.owned}
            assert not (set(result.assignment[m]) - set(subs[m].owned)) & others
        if not result.followup:
            return rounds, result.assignment
        subs = {m: Subscription(s.topics, tuple(result.assignment[m])) for m, s in subs.items()}
    raise AssertionError("cooperative rebalancing did not converge")


@settings(max_examples=100, deadline=None)
@given(groups())
def test_cooperative_converges(group: tuple[dict[str, Subscription], dict[str, int]]) -> None:
    subs, partitions = group
    rounds, final = rounds_to_converge(subs, partitions)
    assert rounds <= 3
    assert set().union(*map(set, final.values())) == expected_partitions(subs, partitions)


@settings(max_examples=100, deadline=None)
@given(partition_counts, member_ids, st.data())
def test_cooperative_needs_one_follow_up_with_same_subscriptions(
    partitions: dict[str, int], members: list[str], data: st.DataObject
) -> None:
    all_tps = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)]
    subs = {}
    for m in members:
        owned = data.draw(st.lists(st.sampled_from(all_tps), unique=True)) if all_tps else []
        subs[m] = Subscription(tuple(partitions), tuple(owned))
    rounds, final = rounds_to_converge(subs, partitions)
    assert rounds <= 2
    loads = [len(p) for p in final.values()]
    assert max(loads) - min(loads) <= 1


def test_range_matches_kafka() -> None:
    subs = {"c1": Subscription(("t0", "t1")), "c0": Subscription(("t0", "t1"))}
    result = range_assign(subs, {"t0": 3, "t1": 3})
    tp = TopicPartition
    assert result == {
        "c0": [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)],
        "c1": [tp("t0", 2), tp("t1", 2)],
    }


def test_roundrobin_matches_kafka() -> None:
    subs = {"c0": Subscription(("t0", "t1")), "c1": Subscription(("t0", "t1"))}
    result = roundrobin_assign(subs, {"t0": 3, "t1": 3})
    tp = TopicPartition
    assert result == {
        "c0": [tp("t0", 0), tp("t0", 2), tp("t1", 1)],
        "c1": [tp("t0", 1), tp("t1", 0), tp("t1", 2)],
    }


def test_extra_members_stay_idle() -> None:
    subs = {f"m{i}": Subscription(("t",)) for i in range(5)}
    for strategy in ASSIGNORS:
        loads = sorted(len(p) for p in assign(strategy, subs, {"t": 3}).assignment.values())
        assert loads == [0, 0, 1, 1, 1]


def test_protocol_choice() -> None:
    assert choose_protocol([["sticky", "range"], ["range", "sticky"]]) == "sticky"
    assert choose_protocol([["range", "roundrobin"], ["roundrobin"]]) == "roundrobin"
    with pytest.raises(InconsistentGroupProtocolError):
        choose_protocol([["range"], ["roundrobin"]])
    with pytest.raises(InconsistentGroupProtocolError):
        assign("magic", {}, {})
