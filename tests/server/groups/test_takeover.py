"""Coordinator failover (SIGKILL) and offsets surviving broker restarts."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.groups.members import POOL, Member, create_topic, fetch_offsets, rejoin_all
from tests.server.groups.test_membership import ALL, GROUP_SETTINGS, assert_split


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_coordinator_killed_another_takes_over(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    brokers = [start_broker(root, **GROUP_SETTINGS) for _ in range(2)]
    create_topic(brokers[0].url, "orders", 3)
    found = httpx.get(f"{brokers[0].url}/v1/groups/gt/coordinator").json()
    coordinator = next(b for b in brokers if b.url == found["url"])
    survivor = next(b for b in brokers if b is not coordinator)
    members = [
        Member(survivor.url, "gt", ["orders"], client_id=f"c{i}", session_timeout_ms=3_000)
        for i in range(2)
    ]
    members[0].join()
    pending = members[1].join_async()
    members[0].heartbeat_until_error()
    members[0].join()
    pending.result(timeout=60)
    assert_split(members)
    generation = members[0].generation_id
    committed = {}
    for m in members:
        offsets = {tp: 10 + tp[1] for tp in m.assignment}
        assert m.commit(offsets).status_code == 200
        committed.update(offsets)

    coordinator.kill()

    # Heartbeats through the survivor: COORDINATOR_NOT_AVAILABLE until the dead broker's
    # registry entry expires, then the survivor loads the group and asks for a rejoin.
    assert members[0].heartbeat_until_error(timeout_s=30) in (
        "REBALANCE_IN_PROGRESS",
        "UNKNOWN_MEMBER_ID",
    )
    rejoin_all(members)
    assert_split(members)
    assert members[0].generation_id > generation
    after = httpx.get(f"{survivor.url}/v1/groups/gt/coordinator").json()
    assert after["url"] == survivor.url
    assert fetch_offsets(survivor.url, "gt") == committed
    # The new generation commits; the old one is fenced.
    tp = next(iter(members[0].assignment))
    assert members[0].commit({tp: 99}).status_code == 200
    stale = Member(
        survivor.url, "gt", ["orders"], member_id=members[0].member_id, generation_id=generation
    )
    assert stale.commit({tp: 5}).json()["error"] == "ILLEGAL_GENERATION"
    assert fetch_offsets(survivor.url, "gt")[tp] == 99
    assert {m.heartbeat() for m in members} == {None}
    assert set().union(*(m.assignment for m in members)) == ALL


def test_offsets_survive_broker_restarts(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    first = start_broker(root, **GROUP_SETTINGS)
    create_topic(first.url, "orders", 3)
    simple = Member(first.url, "gr", ["orders"])
    assert simple.commit({("orders", 0): 4, ("orders", 2): 9}).status_code == 200
    assert simple.commit({("orders", 0): 6}).status_code == 200
    first.stop()
    second = start_broker(root, **GROUP_SETTINGS)
    assert fetch_offsets(second.url, "gr") == {("orders", 0): 6, ("orders", 2): 9}
    second.kill()
    third = start_broker(root, **GROUP_SETTINGS)
    assert fetch_offsets(third.url, "gr") == {("orders", 0): 6, ("orders", 2): 9}
    listed = httpx.get(f"{third.url}/v1/groups").json()["groups"]
    assert {"group_id": "gr", "state": "Empty", "protocol_type": "consumer", "members": 0} in listed


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_concurrent_commits_share_delta_commits(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **{**GROUP_SETTINGS, "offsets_commit_linger_ms": 500})
    create_topic(broker.url, "orders", 3)
    assert Member(broker.url, "warm", ["orders"]).commit({("orders", 0): 1}).status_code == 200

    def version() -> int:
        answer = httpx.get(f"{broker.url}/v1/topics/__consumer_offsets", timeout=10)
        assert answer.status_code == 200, answer.text
        return int(answer.json()["version"])

    before = version()
    committers = [Member(broker.url, f"b{i}", ["orders"]) for i in range(12)]
    futures = [POOL.submit(m.commit, {("orders", i % 3): i}) for i, m in enumerate(committers)]
    assert all(f.result(timeout=60).status_code == 200 for f in futures)
    assert version() - before < len(committers)  # batched: fewer Delta commits than requests
    for i in range(12):
        assert fetch_offsets(broker.url, f"b{i}") == {("orders", i % 3): i}
