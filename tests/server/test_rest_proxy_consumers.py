"""REST Proxy v2 consumer instances against a real broker process.

The instances are lakelog consumers living in the broker; this drives them
only over HTTP, as a REST Proxy client would, and checks the group they join
through the admin client.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from lakelog.client import AdminClient, Producer
from server.app import create_app
from server.settings import BrokerSettings
from tests.client.conftest import create_topic
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
GROUP_BROKER = {
    "group_min_session_timeout_ms": 500,
    "group_initial_rebalance_delay_ms": 0,
    "group_tick_ms": 50,
}
GUARD_S = 60


def post(http: httpx.Client, path: str, body: Any = None) -> httpx.Response:
    content = b"" if body is None else json.dumps(body).encode()
    return http.post(path, content=content, headers={"Content-Type": V2})


def assert_error(response: httpx.Response, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(V2)
    body = response.json()
    assert body["error_code"] == code and body["message"]
    return str(body["message"])


def records(
    http: httpx.Client, base: str, count: int, accept: str = BINARY
) -> list[dict[str, Any]]:
    """GET records until ``count`` arrived (hang guard only)."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + GUARD_S
    while len(out) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"only {out} after {GUARD_S} s")
        response = http.get(f"{base}/records", params={"timeout": 500}, headers={"Accept": accept})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith(accept)
        out += response.json()
    return out


def decoded(items: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    return sorted(
        (r["partition"], r["offset"], base64.b64decode(r["value"]).decode()) for r in items
    )


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_v2_consumer_instance_lifecycle(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    url = broker.url
    create_topic(url, "rp", 2)
    with Producer(url) as producer:
        for i in range(6):
            producer.send("rp", f"v{i}", partition=i % 2)
    with httpx.Client(base_url=url, timeout=GUARD_S) as http:
        created = post(
            http,
            "/consumers/g1",
            {"name": "c1", "format": "binary", "auto.offset.reset": "earliest"},
        )
        assert created.status_code == 200, created.text
        assert created.json() == {
            "instance_id": "c1",
            "base_uri": f"{url}/consumers/g1/instances/c1",
        }
        base = "/consumers/g1/instances/c1"
        assert_error(post(http, "/consumers/g1", {"name": "c1"}), 409, 40902)

        assert post(http, f"{base}/subscription", {"topics": ["rp"]}).status_code == 204
        assert http.get(f"{base}/subscription").json() == {"topics": ["rp"]}
        got = decoded(records(http, base, 6))
        assert got == sorted((i % 2, i // 2, f"v{i}") for i in range(6))
        assignment = http.get(f"{base}/assignments").json()
        assert assignment == {
            "partitions": [{"topic": "rp", "partition": 0}, {"topic": "rp", "partition": 1}]
        }
        with AdminClient(url) as admin:
            (member,) = admin.describe_group("g1").members
            assert len(member.assignment) == 2

        # commit everything consumed (empty body), then read the committed offsets back
        assert post(http, f"{base}/offsets").status_code == 200
        asked = {"partitions": [{"topic": "rp", "partition": 0}, {"topic": "rp", "partition": 1}]}
        fetched = http.request("GET", f"{base}/offsets", json=asked)
        assert fetched.json() == {
            "offsets": [
                {"topic": "rp", "partition": 0, "offset": 3, "metadata": ""},
                {"topic": "rp", "partition": 1, "offset": 3, "metadata": ""},
            ]
        }
        # positions: beginning of p0, offset 2 of p1
        p0 = {"partitions": [{"topic": "rp", "partition": 0}]}
        assert post(http, f"{base}/positions/beginning", p0).status_code == 204
        seek = {"offsets": [{"topic": "rp", "partition": 1, "offset": 2}]}
        assert post(http, f"{base}/positions", seek).status_code == 204
        assert decoded(records(http, base, 4)) == [
            (0, 0, "v0"),
            (0, 1, "v2"),
            (0, 2, "v4"),
            (1, 2, "v5"),
        ]
        assert post(http, f"{base}/positions/end", p0).status_code == 204
        # an explicit commit names the last record consumed; the next one is committed
        one = {"offsets": [{"topic": "rp", "partition": 0, "offset": 0, "metadata": "m"}]}
        assert post(http, f"{base}/offsets", one).status_code == 200
        fetched = http.request("GET", f"{base}/offsets", json=p0).json()
        assert fetched["offsets"] == [{"topic": "rp", "partition": 0, "offset": 1, "metadata": "m"}]

        # max_bytes: the records over the budget are not skipped, they come next time
        assert post(http, f"{base}/positions/beginning", p0).status_code == 204
        small = http.get(f"{base}/records", params={"timeout": 3000, "max_bytes": 2})
        assert [r["offset"] for r in small.json() if r["partition"] == 0] == [0]
        assert [r for r in decoded(records(http, base, 2)) if r[0] == 0][:2] == [
            (0, 1, "v2"),
            (0, 2, "v4"),
        ]

        # errors: wrong Accept, illegal state, unknown instance, bad bodies, bad group
        assert_error(http.get(f"{base}/records", headers={"Accept": JSON}), 406, 40601)
        assert_error(post(http, f"{base}/assignments", p0), 409, 40903)
        assert_error(http.get("/consumers/g1/instances/nope/records"), 404, 40403)
        assert_error(post(http, "/consumers/g1", {"format": "xml"}), 422, 422)
        # consumer configs the consumer cannot take: the REST Proxy's 42204
        assert_error(post(http, "/consumers/g1", {"auto.offset.reset": "sideways"}), 422, 42204)
        assert_error(post(http, "/consumers/g1", {"unknown": 1}), 422, 422)
        assert_error(post(http, "/consumers/g1", {"fetch.min.bytes": "³"}), 422, 42204)
        assert_error(post(http, "/consumers/bad group!", {}), 422, 42204)
        assert_error(post(http, f"{base}/subscription", {}), 422, 422)
        assert_error(post(http, f"{base}/subscription", {"topic_pattern": "("}), 422, 422)
        bad = http.post(f"{base}/subscription", content=b"{", headers={"Content-Type": V2})
        assert_error(bad, 400, 400)

        # delete: the instance leaves its group and is gone
        assert http.delete(base).status_code == 204
        assert_error(http.get(f"{base}/records"), 404, 40403)
        with AdminClient(url) as admin:
            assert admin.describe_group("g1").members == []


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_v2_json_instance_pattern_assign_and_expiry(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    url = broker.url
    create_topic(url, "js-1", 1)
    with httpx.Client(base_url=url, timeout=GUARD_S) as http:
        produced = http.post(
            "/topics/js-1",
            json={"records": [{"key": {"k": 1}, "value": {"n": i}} for i in range(3)]},
            headers={"Content-Type": JSON},
        )
        assert produced.status_code == 200, produced.text
        body: dict[str, Any] = {
            "name": "j",
            "format": "json",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "true",
        }
        assert post(http, "/consumers/g2", body).status_code == 200
        base = "/consumers/g2/instances/j"
        assert post(http, f"{base}/subscription", {"topic_pattern": "js-.*"}).status_code == 204
        got = records(http, base, 3, accept=JSON)
        assert [(r["key"], r["value"]) for r in got] == [({"k": 1}, {"n": i}) for i in range(3)]
        assert http.get(f"{base}/subscription").json() == {"topics": ["js-1"]}
        assert http.delete(f"{base}/subscription").status_code == 204
        # manual assignment after unsubscribing
        part = {"partitions": [{"topic": "js-1", "partition": 0}]}
        assert post(http, f"{base}/assignments", part).status_code == 204
        assert http.get(f"{base}/assignments").json() == part
        # deleting with auto-commit on committed what the subscription consumed
        assert http.delete(base).status_code == 204
        with AdminClient(url) as admin:
            assert {
                tp.partition: om.offset for tp, om in admin.list_group_offsets("g2").items()
            } == {0: 3}

        # an idle instance expires after consumer.instance.timeout.ms
        body = {"name": "idle", "consumer.instance.timeout.ms": 1000}
        assert post(http, "/consumers/g3", body).status_code == 200
        deadline = time.monotonic() + GUARD_S
        while http.get("/consumers/g3/instances/idle/subscription").status_code == 200:
            if time.monotonic() > deadline:
                pytest.fail("the idle instance never expired")
            time.sleep(1.5)  # each request renews the instance: leave it idle longer
        assert_error(http.get("/consumers/g3/instances/idle/subscription"), 404, 40403)


def _manager_threads() -> set[threading.Thread]:
    """The threads of instance managers (the sweeper, the pool that runs consumer calls)."""
    return {t for t in threading.enumerate() if t.name.startswith("rest-consumer")}


def test_the_app_lifespan_closes_every_instance_at_shutdown(tmp_path: Path) -> None:
    """Instances live as long as the broker's app: its shutdown closes each instance (commit if
    auto-commit, leave the group), its consumer and the consumer's connection, and stops the
    manager's threads, so nothing of an instance outlives the app that made it."""
    before = _manager_threads()
    # In-process only: no checkpoint helper.
    app = create_app(BrokerSettings(root=str(tmp_path / "root"), checkpoint_process=False))
    with TestClient(app) as http:
        created = http.post("/consumers/g1", json={"name": "c1"}, headers={"Content-Type": V2})
        assert created.status_code == 200, created.text
        instance = app.state.rest_consumers.get("g1", "c1")
        assert not instance.closed
        started = _manager_threads() - before
        assert started, "the app made no instance manager"
    assert instance.closed
    with pytest.raises(RuntimeError, match="the consumer is closed"):
        instance.consumer.poll(0)
    with pytest.raises(RuntimeError, match="the connection is closed"):
        instance.consumer.connection.request("GET", "/v1/metadata")
    for thread in started:
        thread.join(GUARD_S)
        assert not thread.is_alive(), f"{thread.name} outlived the app"
