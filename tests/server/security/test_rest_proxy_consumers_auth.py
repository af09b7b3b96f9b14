"""REST Proxy v2 consumer instances with authentication on: an instance acts with its
creator's credentials (so the creator's ACLs apply to what it reads and commits) and
answers only its creator."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import (
    ADMIN,
    StartBroker,
    acl,
    add_acls,
    bearer,
    create_topic,
    key,
    produce_body,
    start_secured,
)

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
GROUP_SETTINGS = {
    "group_min_session_timeout_ms": 500,
    "group_initial_rebalance_delay_ms": 0,
    "group_tick_ms": 50,
}
GUARD_S = 60


def post(http: httpx.Client, path: str, headers: dict[str, str], body: Any) -> httpx.Response:
    return http.post(
        path, content=json.dumps(body).encode(), headers={**headers, "Content-Type": V2}
    )


def test_instances_act_as_and_answer_only_their_creator(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = start_secured(
        start_broker, RootSpec(str(tmp_path / "root")), tmp_path, **GROUP_SETTINGS
    )
    create_topic(broker, "feed")
    create_topic(broker, "secret")
    add_acls(
        broker,
        acl("User:alice", "READ", "feed"),
        acl("User:alice", "READ", "readers", resource_type="GROUP"),
        acl("User:bob", "READ", "readers", resource_type="GROUP"),
    )
    with httpx.Client(base_url=broker.url, timeout=GUARD_S) as http:
        for value in ("a", "b"):
            answer = http.post("/v1/topics/feed/records", json=produce_body(value), headers=ADMIN)
            assert answer.status_code == 200, answer.text

        alice = bearer("User:alice")
        created = post(
            http, "/consumers/readers", alice, {"name": "a1", "auto.offset.reset": "earliest"}
        )
        assert created.status_code == 200, created.text
        base = "/consumers/readers/instances/a1"
        assert post(http, f"{base}/subscription", alice, {"topics": ["feed"]}).status_code == 204

        values: list[str] = []
        deadline = time.monotonic() + GUARD_S
        while len(values) < 2:
            if time.monotonic() > deadline:
                pytest.fail(f"only {values} after {GUARD_S} s")
            got = http.get(
                f"{base}/records", params={"timeout": 500}, headers={**alice, "Accept": BINARY}
            )
            assert got.status_code == 200, got.text
            values += [base64.b64decode(r["value"]).decode() for r in got.json()]
        assert sorted(values) == ["a", "b"]
        commit_all = http.post(f"{base}/offsets", headers={**alice, "Content-Type": V2})
        assert commit_all.status_code == 200, commit_all.text

        # bob may read the group, but alice's instance is not his to drive; that is said
        # before his body is read (an empty one here)
        for answer in (
            http.get(f"{base}/records", headers={**key("User:bob"), "Accept": BINARY}),
            http.get(f"{base}/assignments", headers=key("User:bob")),
            http.post(f"{base}/subscription", headers={**key("User:bob"), "Content-Type": V2}),
            http.delete(base, headers=key("User:bob")),
        ):
            assert answer.status_code == 403, answer.text
            assert answer.json()["error_code"] == 40301

        # the instance reads with alice's rights: a topic she cannot read stays closed
        assert post(http, f"{base}/subscription", alice, {"topics": ["secret"]}).status_code == 204
        refused = http.get(
            f"{base}/records", params={"timeout": 500}, headers={**alice, "Accept": BINARY}
        )
        assert refused.status_code == 403, refused.text

        assert http.delete(base, headers=alice).status_code == 204
    committed = httpx.get(f"{broker.url}/v1/groups/readers/offsets", headers=ADMIN, timeout=30)
    assert committed.status_code == 200, committed.text
    assert [o["offset"] for o in committed.json()["offsets"]] == [2]
