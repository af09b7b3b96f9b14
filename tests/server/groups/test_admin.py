"""Describe (with lag), list, reset offsets and delete, over real brokers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.groups.members import Member, create_topic, fetch_offsets, produce
from tests.server.groups.test_membership import GROUP_SETTINGS


def reset(url: str, to: dict[str, Any], execute: bool, **extra: Any) -> httpx.Response:
    body = {"topics": [{"topic": "orders"}], "to": to, "execute": execute, **extra}
    return httpx.post(f"{url}/v1/groups/ga/offsets:reset", json=body, timeout=30)


def new_offsets(answer: httpx.Response) -> dict[int, int]:
    assert answer.status_code == 200, answer.text
    return {r["partition"]: r["new_offset"] for r in answer.json()["offsets"]}


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_describe_list_reset_delete(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    a = start_broker(root, **GROUP_SETTINGS)
    b = start_broker(root, **GROUP_SETTINGS)
    create_topic(a.url, "orders", 3)
    for p in range(3):
        produce(a.url, "orders", p, 10)
    member = Member(b.url, "ga", ["orders"])
    member.join()
    assert member.commit({("orders", 0): 3, ("orders", 1): 5, ("orders", 2): 10}).status_code == 200

    described = httpx.get(f"{a.url}/v1/groups/ga").json()
    assert described["state"] == "Stable" and described["protocol"] == "range"
    lags = {
        o["partition"]: (o["log_end_offset"], o["lag"], o["member_id"])
        for o in described["offsets"]
    }
    assert lags == {
        0: (10, 7, member.member_id),
        1: (10, 5, member.member_id),
        2: (10, 0, member.member_id),
    }
    listed = httpx.get(f"{b.url}/v1/groups").json()["groups"]
    assert {
        "group_id": "ga",
        "state": "Stable",
        "protocol_type": "consumer",
        "members": 1,
    } in listed

    # Active members: dry runs are fine, executing and deleting are refused (nothing changes).
    assert new_offsets(reset(a.url, {"earliest": True}, execute=False)) == {0: 0, 1: 0, 2: 0}
    refused = reset(a.url, {"earliest": True}, execute=True)
    assert refused.status_code == 409 and refused.json()["error"] == "NON_EMPTY_GROUP"
    deleting = httpx.delete(f"{b.url}/v1/groups/ga")
    assert deleting.status_code == 409 and deleting.json()["error"] == "NON_EMPTY_GROUP"
    assert fetch_offsets(a.url, "ga") == {("orders", 0): 3, ("orders", 1): 5, ("orders", 2): 10}

    assert member.leave().status_code == 204
    assert httpx.get(f"{a.url}/v1/groups/ga").json()["state"] == "Empty"
    assert new_offsets(reset(b.url, {"earliest": True}, execute=True)) == {0: 0, 1: 0, 2: 0}
    assert fetch_offsets(a.url, "ga") == {("orders", p): 0 for p in range(3)}
    assert new_offsets(reset(a.url, {"shift_by": -2}, execute=False)) == {0: 0, 1: 0, 2: 0}
    assert new_offsets(reset(a.url, {"offset": 7}, execute=True)) == {0: 7, 1: 7, 2: 7}
    assert new_offsets(reset(a.url, {"shift_by": -2}, execute=True)) == {0: 5, 1: 5, 2: 5}
    assert new_offsets(reset(a.url, {"offset": 500}, execute=False)) == {0: 10, 1: 10, 2: 10}
    assert new_offsets(reset(a.url, {"latest": True}, execute=False)) == {0: 10, 1: 10, 2: 10}
    assert new_offsets(reset(a.url, {"current": True}, execute=False)) == {0: 5, 1: 5, 2: 5}
    assert new_offsets(reset(a.url, {"datetime": "2999-01-01T00:00:00Z"}, execute=False)) == {
        0: 10,
        1: 10,
        2: 10,
    }
    assert new_offsets(reset(a.url, {"datetime": "2000-01-01T00:00:00"}, execute=False)) == {
        0: 0,
        1: 0,
        2: 0,
    }
    assert new_offsets(reset(a.url, {"duration": "P1D"}, execute=False)) == {0: 0, 1: 0, 2: 0}
    one = httpx.post(
        f"{a.url}/v1/groups/ga/offsets:reset",
        json={
            "topics": [{"topic": "orders", "partitions": [1]}],
            "to": {"offset": 1},
            "execute": True,
        },
    )
    assert new_offsets(one) == {1: 1}
    assert fetch_offsets(b.url, "ga") == {("orders", 0): 5, ("orders", 1): 1, ("orders", 2): 5}
    everything = httpx.post(
        f"{a.url}/v1/groups/ga/offsets:reset", json={"all_topics": True, "to": {"earliest": True}}
    )
    assert new_offsets(everything) == {0: 0, 1: 0, 2: 0}

    for bad in (
        {"earliest": True, "latest": True},
        {},
        {"duration": "1 hour"},
        {"datetime": "soon"},
    ):
        answer = reset(a.url, bad, execute=True)
        assert answer.status_code == 400 and answer.json()["error"] == "INVALID_REQUEST", (
            answer.text
        )
    missing = httpx.post(
        f"{a.url}/v1/groups/ga/offsets:reset",
        json={
            "topics": [{"topic": "orders", "partitions": [7]}],
            "to": {"offset": 1},
            "execute": True,
        },
    )
    assert missing.json()["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert fetch_offsets(b.url, "ga") == {("orders", 0): 5, ("orders", 1): 1, ("orders", 2): 5}

    assert httpx.delete(f"{a.url}/v1/groups/ga").status_code == 204
    assert fetch_offsets(b.url, "ga") == {}
    again = httpx.delete(f"{b.url}/v1/groups/ga")
    assert again.status_code == 404 and again.json()["error"] == "GROUP_ID_NOT_FOUND"
    assert "ga" not in {g["group_id"] for g in httpx.get(f"{a.url}/v1/groups").json()["groups"]}
    assert httpx.get(f"{b.url}/v1/groups/ga").json()["state"] == "Dead"
