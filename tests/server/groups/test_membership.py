"""Group membership through real broker subprocesses sharing one storage root."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.groups.members import Member, create_topic, rejoin_all

#: Short timeouts so rebalances and takeovers happen within seconds.
GROUP_SETTINGS = {
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 500,
    "heartbeat_interval_ms": 200,
    "broker_session_timeout_ms": 2_000,
    "offsets_topic_num_partitions": 5,
}
ALL = {("orders", p) for p in range(3)}


@pytest.fixture(scope="module")
def two_brokers(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> tuple[BrokerProcess, BrokerProcess]:
    """Two brokers on one local root for the module; each test has a group of its own."""
    root = RootSpec(str(tmp_path_factory.mktemp("membership-root")))
    a = start_module_broker(root, **GROUP_SETTINGS)
    b = start_module_broker(root, **GROUP_SETTINGS)
    create_topic(a.url, "orders", 3)
    return a, b


def assert_split(members: list[Member]) -> None:
    owned = [m.assignment for m in members]
    assert set().union(*owned) == ALL
    assert sum(len(o) for o in owned) == len(ALL), owned
    assert len({m.generation_id for m in members}) == 1


def test_two_members_on_two_brokers_split_the_partitions(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = two_brokers
    first = Member(a.url, "g1", ["orders"], client_id="c1")
    first.join()
    assert first.assignment == ALL and first.generation_id == 1
    second = Member(b.url, "g1", ["orders"], client_id="c2")
    pending = second.join_async()
    assert first.heartbeat_until_error() == "REBALANCE_IN_PROGRESS"
    first.join()
    pending.result(timeout=60)
    assert first.generation_id == 2
    assert_split([first, second])
    assert first.assignment and second.assignment
    # Both brokers name the same coordinator, and describe shows both members.
    coordinators = {
        httpx.get(f"{u}/v1/groups/g1/coordinator").json()["broker_id"] for u in (a.url, b.url)
    }
    assert len(coordinators) == 1
    described = httpx.get(f"{b.url}/v1/groups/g1").json()
    assert described["state"] == "Stable" and described["generation_id"] == 2
    assert {m["member_id"] for m in described["members"]} == {first.member_id, second.member_id}


def test_more_members_than_partitions_leaves_extras_idle(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = two_brokers
    members = [Member((a, b)[i % 2].url, "g2", ["orders"], client_id=f"c{i}") for i in range(4)]
    members[0].join()
    for newcomer in members[1:]:
        pending = newcomer.join_async()
        joined = [m for m in members if m.member_id and m is not newcomer]
        for m in joined:
            assert m.heartbeat_until_error() == "REBALANCE_IN_PROGRESS"
        rejoin_all(joined)
        pending.result(timeout=60)
    assert_split(members)
    assert sorted(len(m.assignment) for m in members) == [0, 1, 1, 1]


def test_leave_and_session_timeout_rebalance(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = two_brokers
    first = Member(a.url, "g3", ["orders"], protocols=["sticky", "range"])
    second = Member(b.url, "g3", ["orders"], protocols=["sticky", "range"])
    first.join()
    pending = second.join_async()
    first.heartbeat_until_error()
    first.join()
    pending.result(timeout=60)
    assert_split([first, second])
    kept = set(first.assignment)
    # A clean leave: the other member is asked to rejoin and takes everything.
    assert second.leave().status_code == 204
    assert first.heartbeat_until_error() == "REBALANCE_IN_PROGRESS"
    first.join()
    assert first.assignment == ALL and kept <= first.assignment
    # A member that stops heartbeating is expired after its session timeout.
    third = Member(b.url, "g3", ["orders"], protocols=["sticky"], session_timeout_ms=1_000)
    pending = third.join_async()
    first.heartbeat_until_error()
    first.join()
    pending.result(timeout=60)
    assert_split([first, third])
    generation = first.generation_id
    assert first.heartbeat_until_error(timeout_s=30, interval_s=0.2) == "REBALANCE_IN_PROGRESS"
    first.join()
    assert first.assignment == ALL and first.generation_id == generation + 1
    assert third.heartbeat() == "UNKNOWN_MEMBER_ID"


def test_commit_fencing_errors(two_brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = two_brokers
    member = Member(a.url, "g4", ["orders"])
    member.join()
    assert member.commit({("orders", 0): 5}).status_code == 200
    stale = Member(b.url, "g4", ["orders"], member_id=member.member_id, generation_id=0)
    answer = stale.commit({("orders", 0): 6})
    assert answer.status_code == 409 and answer.json()["error_code"] == 22, answer.text
    stranger = Member(b.url, "g4", ["orders"], member_id="nobody", generation_id=1)
    answer = stranger.commit({("orders", 0): 7})
    assert answer.status_code == 409 and answer.json()["error_code"] == 25, answer.text
    simple = Member(b.url, "g4", ["orders"], member_id="", generation_id=-1)
    answer = simple.commit({("orders", 0): 8})
    assert answer.json()["error"] == "UNKNOWN_MEMBER_ID", answer.text
    assert stranger.heartbeat() == "UNKNOWN_MEMBER_ID"
    answer = httpx.get(f"{a.url}/v1/groups/g4/offsets").json()
    assert [(o["partition"], o["offset"], o["metadata"]) for o in answer["offsets"]] == [
        (0, 5, "m5")
    ]


def test_first_join_needs_a_member_id_and_bad_input_is_refused(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = two_brokers
    body = {
        "member_id": "",
        "protocols": ["range"],
        "topics": ["orders"],
        "session_timeout_ms": 2000,
    }
    first = httpx.post(f"{a.url}/v1/groups/g5/members", json=body)
    assert first.status_code == 409 and first.json()["error"] == "MEMBER_ID_REQUIRED"
    assert first.json()["details"]["member_id"]
    bad = httpx.post(f"{a.url}/v1/groups/bad%20group/members", json=body)
    assert bad.status_code == 400 and bad.json()["error"] == "INVALID_GROUP_ID"
    short = httpx.post(f"{b.url}/v1/groups/g5/members", json={**body, "session_timeout_ms": 10})
    assert short.json()["error"] == "INVALID_SESSION_TIMEOUT"
    unknown = httpx.post(f"{a.url}/v1/groups/g5/members", json={**body, "protocols": ["magic"]})
    assert unknown.json()["error"] == "INCONSISTENT_GROUP_PROTOCOL"
    missing = httpx.post(
        f"{a.url}/v1/groups/g5/offsets",
        json={"generation_id": -1, "offsets": [{"topic": "nope", "partition": 0, "offset": 1}]},
    )
    assert missing.status_code == 404 and missing.json()["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert httpx.get(f"{a.url}/v1/groups/g5/offsets").json()["offsets"] == []
    # A forwarded request reaching a broker that is not the coordinator is not forwarded again.
    coordinator = httpx.get(f"{a.url}/v1/groups/g5/coordinator").json()["url"]
    other = b.url if coordinator == a.url else a.url
    miss = httpx.post(
        f"{other}/v1/groups/g5/members/x/heartbeat",
        json={"generation_id": 1},
        headers={"X-Lakelog-Forwarded": "test"},
    )
    assert miss.status_code == 421 and miss.json()["error_code"] == 16
    assert miss.json()["details"]["coordinator_url"] == coordinator
