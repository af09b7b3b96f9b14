"""The group state machine with an explicit clock (no threads, no sleeps)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakelog.errors import (
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from lakelog.groups.state import MAX_FENCED_IDS, Group, GroupLimits, GroupState, JoinRequest
from lakelog.structs import TopicPartition

LIMITS = GroupLimits(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
PARTITIONS = {"t": 4}


def request(protocols: tuple[str, ...] = ("range",), session: int = 1_000) -> JoinRequest:
    return JoinRequest("client", session, 5_000, protocols, ("t",))


def new_member(group: Group, now: int, req: JoinRequest | None = None) -> str:
    """The two-step join: MEMBER_ID_REQUIRED hands out the id to join with."""
    with pytest.raises(MemberIdRequiredError) as required:
        group.join("", req or request(), now)
    member_id = str(required.value.details["member_id"])
    group.join(member_id, req or request(), now)
    return member_id


def state_of(group: Group) -> GroupState:
    """The state, read through a call so mypy does not narrow it across mutations."""
    return group.state


def complete(group: Group, now: int) -> None:
    assert group.ready(now)
    group.complete(PARTITIONS)
    assert state_of(group) is GroupState.COMPLETING_REBALANCE
    group.finish(now)


def test_two_members_rebalance_into_disjoint_assignments() -> None:
    group = Group("g", LIMITS)
    a = new_member(group, 0)
    complete(group, 0)
    assert state_of(group) is GroupState.STABLE and group.generation_id == 1
    assert group.members[a].assignment == [TopicPartition("t", p) for p in range(4)]
    b = new_member(group, 10)
    assert state_of(group) is GroupState.PREPARING_REBALANCE
    assert not group.ready(10)  # a has not rejoined yet
    with pytest.raises(RebalanceInProgressError):
        group.heartbeat(a, 1, 20)
    group.check_commit(a, 1)  # the current generation may commit while preparing
    group.join(a, request(), 30)
    complete(group, 30)
    assert group.generation_id == 2
    owned = [set(group.members[m].assignment) for m in (a, b)]
    assert not owned[0] & owned[1] and len(owned[0] | owned[1]) == 4
    assert group.join_result(b).members == [a, b] and group.join_result(b).leader_id == a
    with pytest.raises(IllegalGenerationError):
        group.check_commit(a, 1)
    with pytest.raises(UnknownMemberIdError):
        group.check_commit("stranger", 2)
    with pytest.raises(UnknownMemberIdError):
        group.check_commit("", -1)  # a simple commit while members are active
    group.heartbeat(a, 2, 40)
    assert group.sync(b, 2) == group.members[b].assignment


def test_session_timeout_and_rebalance_timeout_expire_members() -> None:
    group = Group("g", LIMITS)
    a = new_member(group, 0)
    b = new_member(group, 0)
    complete(group, 0)
    group.heartbeat(a, 1, 900)
    assert group.expire(1_000) == []
    assert group.expire(1_500) == [b]  # b's last heartbeat was at 0 (session 1000)
    assert state_of(group) is GroupState.PREPARING_REBALANCE
    # a does not rejoin: its session (restarted with the rebalance) runs out too.
    assert group.expire(2_500) == []
    assert group.expire(2_501) == [a]
    complete(group, 2_501)
    assert state_of(group) is GroupState.EMPTY and group.generation_id == 2
    group.check_commit("", -1)  # simple commits are fine now


def test_a_member_waiting_in_its_join_is_not_expired_but_others_are_after_the_deadline() -> None:
    group = Group("g", LIMITS)
    a = new_member(group, 0, request(session=10_000))
    b = new_member(group, 0, request(session=10_000))
    complete(group, 0)
    group.join(a, request(session=10_000), 100)  # a rejoins; b never does
    assert not group.ready(4_000)
    assert group.ready(5_100)  # the rebalance timeout (5000 ms) has passed
    group.complete(PARTITIONS)
    group.finish(5_100)
    assert list(group.members) == [a] and len(group.members[a].assignment) == 4
    with pytest.raises(UnknownMemberIdError):
        group.heartbeat(b, 2, 5_200)


def test_leave_and_pending_ids() -> None:
    group = Group("g", LIMITS)
    a = new_member(group, 0)
    complete(group, 0)
    with pytest.raises(MemberIdRequiredError) as required:
        group.join("", request(), 10)
    pending = str(required.value.details["member_id"])
    group.heartbeat(a, 1, 1_500)
    group.expire(2_000)  # a pending id dies with its session timeout
    with pytest.raises(UnknownMemberIdError):
        group.join(pending, request(), 2_000)
    group.heartbeat(a, 1, 2_000)
    group.leave(a, 2_000)
    complete(group, 2_000)
    assert state_of(group) is GroupState.EMPTY and not group.members
    with pytest.raises(UnknownMemberIdError):
        group.leave(a, 2_100)


def test_bad_joins_change_nothing() -> None:
    group = Group("g", LIMITS)
    a = new_member(group, 0, request(("roundrobin",)))
    complete(group, 0)
    with pytest.raises(InvalidSessionTimeoutError):
        group.join("", request(session=10), 1)
    with pytest.raises(InconsistentGroupProtocolError):
        group.join("", request(("range",)), 1)
    with pytest.raises(InconsistentGroupProtocolError):
        group.join("", request(("magic",)), 1)
    with pytest.raises(UnknownMemberIdError):
        group.join("made-up", request(("roundrobin",)), 1)
    assert state_of(group) is GroupState.STABLE and list(group.members) == [a] and not group.pending


def test_initial_rebalance_delay() -> None:
    group = Group("g", GroupLimits(min_session_timeout_ms=100, initial_rebalance_delay_ms=300))
    new_member(group, 0)
    assert not group.ready(299)
    assert group.ready(300)


def test_restore_asks_members_to_rejoin() -> None:
    group = Group("g", LIMITS)
    a = new_member(group, 0, request(("sticky",)))
    b = new_member(group, 0, request(("sticky",)))
    complete(group, 0)
    before = {m: set(group.members[m].assignment) for m in (a, b)}
    record = group.record()
    restored = Group.restore(record, LIMITS, 10_000)
    assert restored.generation_id == 1 and set(restored.members) == {a, b}
    with pytest.raises(RebalanceInProgressError):
        restored.heartbeat(a, 1, 10_001)
    for m in (a, b):
        restored.join(m, JoinRequest("client", 1_000, 5_000, ("sticky",), ("t",), None), 10_002)
    complete(restored, 10_002)
    # Sticky: with no owned list sent, the last durable assignment is kept.
    assert {m: set(restored.members[m].assignment) for m in (a, b)} == before
    assert restored.generation_id == 2


def test_cooperative_hand_over_takes_a_follow_up_rebalance() -> None:
    group = Group("g", LIMITS)
    coop = request(("cooperative-sticky",))
    a = new_member(group, 0, coop)
    complete(group, 0)
    b = new_member(group, 1, coop)
    owned_a = tuple(group.members[a].assignment)
    group.join(a, JoinRequest("client", 1_000, 5_000, coop.protocols, ("t",), owned_a), 2)
    complete(group, 2)
    # a keeps half, b gets nothing yet: nobody holds a partition another still owns.
    assert len(group.members[a].assignment) == 2 and group.members[b].assignment == []
    assert state_of(group) is GroupState.PREPARING_REBALANCE  # the follow-up round
    for m in (a, b):
        owned = tuple(group.members[m].assignment)
        group.join(m, JoinRequest("client", 1_000, 5_000, coop.protocols, ("t",), owned), 3)
    complete(group, 3)
    assert [len(group.members[m].assignment) for m in (a, b)] == [2, 2]
    assert state_of(group) is GroupState.STABLE


def static(instance: str) -> JoinRequest:
    return replace(request(), group_instance_id=instance)


def test_a_static_member_gets_its_id_at_once_and_a_second_instance_fences_the_first() -> None:
    group = Group("g", LIMITS)
    first = group.join("", static("node-1"), 0)  # no MEMBER_ID_REQUIRED round trip
    other = new_member(group, 0)
    complete(group, 0)
    owned = list(group.members[first].assignment)
    assert owned and group.generation_id == 1

    # the same instance id started again (a restart, or a second process by mistake)
    second = group.join("", static("node-1"), 50)
    assert second != first and first not in group.members
    assert group.members[second].assignment == owned  # it takes the partitions over
    # ...in the same generation: nothing of the group changed (KIP-345)
    assert state_of(group) is GroupState.STABLE and group.generation_id == 1
    assert group.join_result(second).assignment == owned
    group.join(other, request(), 60)  # a rejoin of another member rebalances as ever
    group.join(second, static("node-1"), 60)
    complete(group, 60)
    assert sorted(group.members) == sorted([second, other])

    # every request of the replaced member is refused as fenced, not as unknown
    calls = (
        lambda: group.heartbeat(first, group.generation_id, 70),
        lambda: group.sync(first, group.generation_id),
        lambda: group.check_commit(first, group.generation_id),
        lambda: group.leave(first, 70),
        lambda: group.join(first, static("node-1"), 70),
        lambda: group.join(first, request(), 70),
    )
    for call in calls:
        with pytest.raises(FencedInstanceIdError) as fenced:
            call()
        assert fenced.value.details["group_instance_id"] == "node-1"
        assert not fenced.value.retriable
    assert sorted(group.members) == sorted([second, other]) and group.generation_id == 2

    # a coordinator taking the group over from its durable generation still fences it
    restored = Group.restore(group.record(), LIMITS, 75)
    with pytest.raises(FencedInstanceIdError):
        restored.join(first, static("node-1"), 75)

    # the current holder rejoins normally; a stranger claiming the instance id is fenced
    group.join(second, static("node-1"), 80)
    with pytest.raises(FencedInstanceIdError):
        group.join(other, static("node-1"), 80)
    with pytest.raises(UnknownMemberIdError):
        group.join("nobody", static("node-2"), 80)


def test_static_members_count_against_the_group_size_and_fenced_ids_are_bounded() -> None:
    group = Group("g", GroupLimits(min_session_timeout_ms=100, max_size=1))
    member = group.join("", static("a"), 0)
    with pytest.raises(GroupMaxSizeReachedError):
        group.join("", static("b"), 0)
    for now in range(1, MAX_FENCED_IDS + 10):  # replacing the one member never needs room
        member = group.join("", static("a"), now)
    assert list(group.members) == [member]
    assert len(group.fenced) == MAX_FENCED_IDS
