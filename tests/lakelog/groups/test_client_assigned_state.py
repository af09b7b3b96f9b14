"""Client-assigned groups (Kafka protocol) in the group state machine, with an explicit clock."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from lakelog.errors import (
    CorruptRecordError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from lakelog.groups.client_assigned import (
    ClientAssignedJoinRequest,
    MemberMetadata,
    elect_protocol,
)
from lakelog.groups.state import (
    AssignmentMode,
    Group,
    GroupLimits,
    GroupState,
    JoinRequest,
)

LIMITS = GroupLimits(min_session_timeout_ms=100, initial_rebalance_delay_ms=0)
SESSION = 1_000
REBALANCE = 5_000


def kafka(
    *protocols: tuple[str, bytes], protocol_type: str = "consumer", client_id: str = "k"
) -> ClientAssignedJoinRequest:
    return ClientAssignedJoinRequest(
        client_id=client_id,
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=REBALANCE,
        protocol_type=protocol_type,
        protocols=protocols or (("range", b"sub-" + client_id.encode()),),
    )


def http() -> JoinRequest:
    return JoinRequest("h", SESSION, REBALANCE, ("range",), ("t",))


def new_member(group: Group, now: int, req: ClientAssignedJoinRequest | JoinRequest) -> str:
    """Kafka's two-step join (v4+): MEMBER_ID_REQUIRED, then the join with that id."""
    with pytest.raises(MemberIdRequiredError) as required:
        group.join("", req, now)
    member_id = str(required.value.details["member_id"])
    assert group.join(member_id, req, now) == member_id
    return member_id


def state_of(group: Group) -> GroupState:
    """The state, read through a call so mypy does not narrow it across mutations."""
    return group.state


def mode_of(group: Group) -> AssignmentMode | None:
    return group.mode


def form(group: Group, now: int) -> None:
    """Complete the join phase: the generation forms and awaits the leader's assignment."""
    assert group.ready(now)
    assert group.complete_join(now) is None
    assert state_of(group) is GroupState.COMPLETING_REBALANCE


def settle(group: Group, now: int, assignments: dict[str, bytes]) -> None:
    """Form the generation and let its leader sync ``assignments``; the group is Stable."""
    form(group, now)
    leader = group.leader_id
    assert leader is not None
    record = group.sync_client(leader, group.generation_id, assignments, now)
    assert record is not None
    group.finish(now)
    assert state_of(group) is GroupState.STABLE


def three_members(group: Group, now: int = 0) -> list[str]:
    return [
        new_member(group, now, kafka(("range", f"m{i}".encode()), client_id=f"c{i}"))
        for i in range(3)
    ]


def test_the_first_member_leads_and_alone_gets_every_members_metadata() -> None:
    group = Group("g", LIMITS)
    a, b, c = three_members(group)
    assert state_of(group) is GroupState.PREPARING_REBALANCE and group.mode is AssignmentMode.CLIENT
    form(group, 0)
    answers = {m: group.client_join_result(m) for m in (a, b, c)}
    assert {r.generation_id for r in answers.values()} == {1}
    assert {r.leader_id for r in answers.values()} == {a}
    assert {r.protocol_name for r in answers.values()} == {"range"}
    assert {r.protocol_type for r in answers.values()} == {"consumer"}
    assert [r.member_id for r in answers.values()] == [a, b, c]
    assert answers[a].is_leader and answers[a].members == (
        MemberMetadata(a, None, b"m0"),
        MemberMetadata(b, None, b"m1"),
        MemberMetadata(c, None, b"m2"),
    )
    assert answers[b].members == () and answers[c].members == ()


def test_the_protocol_is_chosen_by_the_members_votes() -> None:
    # Only protocols every member supports count; each member votes for its first one.
    assert elect_protocol([["range", "rr"], ["rr", "range"], ["rr", "range"]]) == "rr"
    assert elect_protocol([["sticky", "range"], ["range"], ["range", "sticky"]]) == "range"
    # A tie goes to the leader's (first list's) preference.
    assert elect_protocol([["rr", "range"], ["range", "rr"]]) == "rr"
    with pytest.raises(InconsistentGroupProtocolError):
        elect_protocol([["range"], ["rr"]])

    group = Group("g", LIMITS)
    leader = new_member(group, 0, kafka(("range", b"L-range"), ("roundrobin", b"L-rr")))
    for i in range(2):
        new_member(group, 0, kafka(("roundrobin", f"F{i}-rr".encode()), ("range", b"")))
    form(group, 0)
    result = group.client_join_result(leader)
    assert result.protocol_name == "roundrobin"  # two votes against the leader's one
    assert [m.metadata for m in result.members] == [b"L-rr", b"F0-rr", b"F1-rr"]


def test_followers_wait_for_the_leaders_assignment_which_completes_the_generation() -> None:
    group = Group("g", LIMITS)
    a, b, c = three_members(group)
    form(group, 0)
    assert group.sync_client(b, 1, None, 10) is None
    assert group.client_assignment(b, 1) is None  # still awaited
    group.heartbeat(c, 1, 20)  # heartbeats are fine while the leader assigns
    with pytest.raises(RebalanceInProgressError):
        group.check_commit(b, 1)  # nothing is committed before the generation is durable
    # A follower's assignments are ignored; only the leader's count.
    assert group.sync_client(c, 1, {c: b"mine"}, 30) is None
    record = group.sync_client(a, 1, {a: b"pa", b: b"pb", "stranger": b"x"}, 40)
    assert record is not None and record["generation_id"] == 1
    assert state_of(group) is GroupState.COMPLETING_REBALANCE  # until the record is durable
    group.finish(50)
    assert state_of(group) is GroupState.STABLE
    assert group.client_assignment(a, 1) == b"pa"
    assert group.client_assignment(b, 1) == b"pb"
    assert group.client_assignment(c, 1) == b""  # no entry: empty bytes
    group.check_commit(c, 1)
    # A retried sync of the leader in Stable changes nothing.
    assert group.sync_client(a, 1, {a: b"other"}, 60) is None
    assert group.client_assignment(a, 1) == b"pa"
    with pytest.raises(IllegalGenerationError):
        group.sync_client(b, 0, None, 60)
    described = {d.member_id: d for d in group.describe()}
    assert described[a].metadata == b"m0" and described[a].assignment == b"pa"
    assert described[c].client_id == "c2" and described[c].assignment == b""


def test_member_id_required_and_old_join_versions() -> None:
    group = Group("g", LIMITS)
    with pytest.raises(MemberIdRequiredError) as required:
        group.join("", kafka(), 0)
    assert not group.members and group.pending  # nothing but a pending id
    with pytest.raises(UnknownMemberIdError):
        group.join("made-up", kafka(), 0)
    member_id = str(required.value.details["member_id"])
    assert group.join(member_id, kafka(), 0) == member_id
    # JoinGroup before v4: the id comes with the join answer.
    old = group.join("", replace(kafka(), require_member_id=False), 0)
    assert old != member_id and list(group.members) == [member_id, old]


def test_protocol_types_and_protocols_must_match() -> None:
    group = Group("g", LIMITS)
    for bad in (kafka(protocol_type=""), replace(kafka(), protocols=())):
        with pytest.raises(InconsistentGroupProtocolError):
            group.join("", bad, 0)
    a = new_member(group, 0, kafka(("range", b""), ("roundrobin", b"")))
    settle(group, 0, {})
    with pytest.raises(InconsistentGroupProtocolError, match="protocol type 'connect'"):
        group.join("", kafka(protocol_type="connect"), 1)
    with pytest.raises(InconsistentGroupProtocolError, match="share none"):
        group.join("", kafka(("sticky", b"")), 1)
    # The only member may change its protocols: nobody else to agree with.
    group.join(a, kafka(("sticky", b"s")), 2)
    with pytest.raises(InconsistentGroupProtocolError):
        group.sync_client(a, 1, None, 3, protocol_type="connect")  # SyncGroup v5 checks
    assert state_of(group) is GroupState.PREPARING_REBALANCE and list(group.members) == [a]
    assert not group.pending


def test_server_and_client_assigned_members_never_share_a_group() -> None:
    group = Group("g", LIMITS)
    h = new_member(group, 0, http())
    assert mode_of(group) is AssignmentMode.SERVER
    with pytest.raises(InconsistentGroupProtocolError, match="assigned by the coordinator"):
        group.join("", kafka(), 1)
    group.complete({"t": 2})
    group.finish(1)
    with pytest.raises(InconsistentGroupProtocolError):
        group.sync_client(h, 1, None, 2)
    group.leave(h, 3)
    group.complete({"t": 2})
    group.finish(3)
    assert state_of(group) is GroupState.EMPTY
    # Empty: a Kafka member may take the group over, and then HTTP members are refused.
    k = new_member(group, 4, kafka())
    assert mode_of(group) is AssignmentMode.CLIENT
    with pytest.raises(InconsistentGroupProtocolError, match="assigned by its members' leader"):
        group.join("", http(), 5)
    settle(group, 5, {k: b"all"})
    with pytest.raises(InconsistentGroupProtocolError):
        group.sync(k, group.generation_id)  # the HTTP sync is not for client-assigned members


def test_a_leader_that_leaves_is_succeeded_in_the_next_generation() -> None:
    group = Group("g", LIMITS)
    a, b, c = three_members(group)
    settle(group, 0, {a: b"1", b: b"2", c: b"3"})
    for m in (b, c):  # rejoins keep the leader while it stays
        group.join(m, kafka(("range", b"again")), 10)
    group.join(a, kafka(("range", b"m0")), 10)
    form(group, 10)
    assert group.leader_id == a and group.generation_id == 2
    assert group.client_join_result(a).members[1].metadata == b"again"
    group.leave(a, 20)  # the leader leaves before it synced: followers must rejoin
    with pytest.raises(RebalanceInProgressError):
        group.client_assignment(b, 2)
    with pytest.raises(RebalanceInProgressError):
        group.sync_client(b, 2, None, 20)
    for m in (b, c):
        group.join(m, kafka(), 30)
    form(group, 30)
    assert group.generation_id == 3 and group.leader_id == b  # the earliest remaining member
    assert group.client_join_result(b).is_leader and group.client_join_result(c).members == ()


def test_a_leader_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    group = Group("g", LIMITS)
    a, b, c = three_members(group)
    form(group, 0)
    assert group.sync_client(b, 1, None, 100) is None  # b waits for the leader
    # b's session would have run out, but a member waiting in its sync is kept;
    # the leader a and the follower c heartbeat, yet neither syncs.
    for now in range(500, REBALANCE + 1, 500):
        group.heartbeat(a, 1, now)
        group.heartbeat(c, 1, now)
        assert group.expire(now) == []
    assert sorted(group.expire(REBALANCE + 1)) == sorted([a, c])  # neither synced in time
    assert state_of(group) is GroupState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgressError):
        group.client_assignment(b, 1)
    group.join(b, kafka(), REBALANCE + 2)
    form(group, REBALANCE + 2)
    assert group.leader_id == b and list(group.members) == [b]


def test_an_unchanged_rejoin_is_answered_from_the_current_generation() -> None:
    group = Group("g", LIMITS)
    a, b, _ = three_members(group)
    form(group, 0)
    # A retried JoinGroup while the leader assigns: same answer, no new rebalance.
    group.join(b, kafka(("range", b"m1"), client_id="c1"), 10)
    assert state_of(group) is GroupState.COMPLETING_REBALANCE
    assert group.client_join_result(b).generation_id == 1
    group.join(a, kafka(("range", b"m0"), client_id="c0"), 10)
    assert len(group.client_join_result(a).members) == 3
    settle_record = group.sync_client(a, 1, {}, 20)
    assert settle_record is not None
    group.finish(20)
    group.join(b, kafka(("range", b"m1"), client_id="c1"), 30)  # a follower: still Stable
    assert state_of(group) is GroupState.STABLE
    group.join(b, kafka(("range", b"changed"), client_id="c1"), 40)  # new metadata: rebalance
    assert state_of(group) is GroupState.PREPARING_REBALANCE


def test_the_leaders_unchanged_rejoin_in_a_stable_group_rebalances() -> None:
    group = Group("g", LIMITS)
    a, _, _ = three_members(group)
    settle(group, 0, {})
    group.join(a, kafka(("range", b"m0"), client_id="c0"), 10)
    assert state_of(group) is GroupState.PREPARING_REBALANCE


def test_restore_from_the_generation_record() -> None:
    group = Group("g", LIMITS)
    a, b, c = three_members(group)
    group.leave(a, 0)  # the leader of the next generation is b, the earliest remaining
    for i, m in ((2, c), (1, b)):
        group.join(m, kafka(("range", f"m{i}".encode()), client_id=f"c{i}"), 0)
    form(group, 0)
    assert group.leader_id == b
    record = group.sync_client(b, 1, {b: b"\x00\xffb", c: b"\x01c"}, 10)
    assert record is not None
    stored = json.loads(json.dumps(record))  # what the generation file holds
    restored = Group.restore(stored, LIMITS, 1_000)
    assert restored.mode is AssignmentMode.CLIENT and restored.protocol_type == "consumer"
    assert restored.protocol == "range" and restored.leader_id == b
    assert restored.generation_id == 1 and list(restored.members) == [b, c]
    described = {d.member_id: d for d in restored.describe()}
    assert described[b].assignment == b"\x00\xffb" and described[c].assignment == b"\x01c"
    assert described[c].metadata == b"m2" and described[c].client_id == "c2"
    # Members must rejoin (with their ids); the leader leads again.
    with pytest.raises(RebalanceInProgressError):
        restored.heartbeat(c, 1, 1_001)
    with pytest.raises(InconsistentGroupProtocolError):
        restored.join("", http(), 1_001)  # still client-assigned
    restored.join(c, kafka(("range", b"m2")), 1_002)
    restored.join(b, kafka(("range", b"m1")), 1_002)
    form(restored, 1_002)
    assert restored.generation_id == 2 and restored.leader_id == b
    assert restored.client_join_result(b).members == (
        MemberMetadata(b, None, b"m1"),
        MemberMetadata(c, None, b"m2"),
    )


def test_a_record_of_a_server_assigned_group_written_before_modes_restores_as_one() -> None:
    group = Group("g", LIMITS)
    h = new_member(group, 0, http())
    record = group.complete({"t": 2})
    for key in ("assignment_mode", "protocol_type"):
        del record[key]
    restored = Group.restore(record, LIMITS, 10)
    assert restored.mode is AssignmentMode.SERVER and list(restored.members) == [h]
    with pytest.raises(InconsistentGroupProtocolError):
        restored.join("", kafka(), 11)


def test_a_corrupt_client_assigned_record_is_refused_by_name() -> None:
    group = Group("g", LIMITS)
    new_member(group, 0, kafka())
    form(group, 0)
    assert group.leader_id is not None
    record = group.sync_client(group.leader_id, 1, {}, 0)
    assert record is not None
    bad_bytes = json.loads(json.dumps(record))
    bad_bytes["members"][0]["assignment_bytes"] = "not base64!"
    with pytest.raises(CorruptRecordError, match="not base64"):
        Group.restore(bad_bytes, LIMITS, 1)
    with pytest.raises(CorruptRecordError, match="assignment_mode"):
        Group.restore({**record, "assignment_mode": "telepathy"}, LIMITS, 1)


def test_a_static_leader_replaced_by_a_new_instance_keeps_leading() -> None:
    group = Group("g", LIMITS)
    static = replace(kafka(("range", b"s")), group_instance_id="node-1")
    first = group.join("", static, 0)  # a static member gets its id at once
    other = new_member(group, 0, kafka(("range", b"o")))
    settle(group, 0, {})
    assert group.leader_id == first
    group.join(other, kafka(("range", b"o2")), 5)  # new metadata: a rebalance starts
    second = group.join("", static, 10)  # the instance restarted: it takes first's place
    form(group, 10)
    assert list(group.members) == [other, second]  # the new id joined last...
    assert group.leader_id == second  # ...yet leads: the leader stays while it stays
    assert group.client_join_result(second).members == (
        MemberMetadata(other, None, b"o2"),
        MemberMetadata(second, "node-1", b"s"),
    )


def test_a_static_member_back_in_a_stable_group_keeps_the_generation() -> None:
    """KIP-345: the restarted instance takes its old id's place and assignment, no rebalance;
    the leader, so answered, keeps the assignment (KIP-814)."""
    group = Group("g", LIMITS)
    static = replace(kafka(("range", b"s")), group_instance_id="node-1")
    first = group.join("", static, 0)
    other = new_member(group, 0, kafka(("range", b"o")))
    settle(group, 0, {first: b"first's", other: b"other's"})
    generation = group.generation_id
    assert group.leader_id == first

    second = group.join("", replace(static, protocols=(("range", b"s2"),)), 10)
    assert state_of(group) is GroupState.STABLE and group.generation_id == generation
    assert first not in group.members and group.leader_id == second
    answer = group.client_join_result(second)
    assert answer.former_member_id == first and answer.is_leader
    assert MemberMetadata(second, "node-1", b"s2") in answer.members
    assert group.sync_client(second, generation, {}, 10) is None  # its assignment stands
    assert group.client_assignment(second, generation) == b"first's"
    assert group.client_assignment(other, generation) == b"other's"
    group.heartbeat(other, generation, 20)  # the other member notices nothing


def test_a_static_member_back_with_another_protocol_rebalances() -> None:
    group = Group("g", LIMITS)
    static = replace(kafka(("range", b"s"), ("roundrobin", b"s")), group_instance_id="node-1")
    first = group.join("", static, 0)
    other = new_member(group, 0, kafka(("range", b"o"), ("roundrobin", b"o")))
    settle(group, 0, {})
    assert group.protocol == "range"
    # Preferring roundrobin, the leader's new vote would elect it: the group rebalances.
    group.join("", replace(static, protocols=(("roundrobin", b"s"), ("range", b"s"))), 10)
    assert state_of(group) is GroupState.PREPARING_REBALANCE
    assert first not in group.members and other in group.members


def test_a_static_member_back_while_its_group_completes_a_rebalance_rebalances() -> None:
    """The leader may be assigning the old id: Kafka starts the rebalance again."""
    group = Group("g", LIMITS)
    static = replace(kafka(("range", b"s")), group_instance_id="node-1")
    group.join("", static, 0)
    new_member(group, 0, kafka(("range", b"o")))
    form(group, 0)
    group.join("", static, 10)
    assert state_of(group) is GroupState.PREPARING_REBALANCE
