"""A group whose members talk to different brokers of one root, and whose coordinator dies.

Each member bootstraps from its own broker; requests reaching the broker that
is not the coordinator are forwarded. When the coordinator broker is killed
with SIGKILL, the other broker takes the group over once the dead one leaves
the registry, the members rejoin, and every record produced is consumed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakelog.client import AdminClient
from tests.client.conftest import create_topic
from tests.client.test_groups import GROUP_BROKER, Member, partitions, produce, wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

TWO_BROKERS = {
    **GROUP_BROKER,
    "heartbeat_interval_ms": 200,
    "broker_session_timeout_ms": 2_000,
}


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_members_on_two_brokers_survive_the_coordinator(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    first = start_broker(root, **TWO_BROKERS)
    second = start_broker(root, **TWO_BROKERS)
    brokers = {b.url: b for b in (first, second)}
    create_topic(first.url, "shared", 4)
    a = Member(first.url, "two", ["shared"])
    b = Member(second.url, "two", ["shared"])
    try:
        wait_for(
            lambda: bool(a.snapshot()[1]) and bool(b.snapshot()[1]),
            "both members to own partitions",
            members=(a, b),
        )
        produce(first.url, "shared", [f"x{i}" for i in range(20)], 4)
        wait_for(
            lambda: len(a.snapshot()[0]) + len(b.snapshot()[0]) >= 20, "20 records", members=(a, b)
        )
        with AdminClient(first.url) as admin:
            coordinator = admin.group_coordinator("two")
        dead = brokers[coordinator.url]
        alive = second if dead is first else first
        dead.kill()

        produce(alive.url, "shared", [f"y{i}" for i in range(20)], 4)

        def all_read() -> bool:
            seen = set(a.snapshot()[0]) | set(b.snapshot()[0])
            return {f"y{i}" for i in range(20)} <= seen

        wait_for(all_read, "every record produced after the coordinator died", members=(a, b))
        wait_for(
            lambda: (
                a.snapshot()[1] | b.snapshot()[1] == partitions("shared", 4)
                and not a.snapshot()[1] & b.snapshot()[1]
            ),
            "one owner per partition again",
            members=(a, b),
        )
        with AdminClient(alive.url) as admin:
            wait_for(
                lambda: admin.group_coordinator("two").url == alive.url,
                "the registry to name the surviving broker coordinator",
            )
        seen = a.snapshot()[0] + b.snapshot()[0]
        assert {f"x{i}" for i in range(20)} | {f"y{i}" for i in range(20)} <= set(seen)
    finally:
        a.close()
        b.close()
