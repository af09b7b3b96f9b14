"""REST Proxy details a client relies on, against a real broker, and the pure pieces behind them.

Content negotiation (406), consumer-config errors (42204), the commit answer
(a JSON document), per-record produce errors on v2 next to the native API's
whole-request refusal, 404s that name the path asked for, and a broker log
free of its own HTTP calls.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.content_negotiation import acceptable
from server.internal_http_logs import InternalCallsAtDebug
from server.kafka.cluster import node_id
from server.rest_proxy.v3_resources import PartitionLag, V3Urls, lag_summary_data
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.rest_proxy_v3_shapes import assert_shape

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def v2_error(response: httpx.Response, status: int, code: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == V2
    body = response.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return str(body["message"])


def stored_values(http: httpx.Client, topic: str, partition: int = 0) -> list[bytes | None]:
    got = http.get(
        f"/v1/topics/{topic}/partitions/{partition}/records",
        params={"offset": 0, "value_format": "base64"},
    )
    assert got.status_code == 200, got.text
    return [
        None if r["value"] is None else base64.b64decode(r["value"]) for r in got.json()["records"]
    ]


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_rest_proxy_client_details(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, group_initial_rebalance_delay_ms=0, group_tick_ms=50)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        created = http.post("/v1/topics", json={"name": "t", "partitions": 1})
        assert created.status_code == 201, created.text

        # -- content negotiation on v2 routes
        for accept in ("text/plain", "application/xml", "text/html, text/plain;q=0.5"):
            message = v2_error(http.get("/topics", headers={"Accept": accept}), 406, 406)
            assert accept.split(",")[0] in message
        v2_error(http.get("/topics/t", headers={"Accept": "*/*;q=0"}), 406, 406)
        for accept in (V2, "application/vnd.kafka+json", "application/json", "*/*",
                       "application/*", "text/plain, application/json;q=0.2", BINARY):  # fmt: skip
            listed = http.get("/topics", headers={"Accept": accept})
            assert listed.status_code == 200 and listed.json() == ["t"], accept
        assert http.get("/topics").status_code == 200  # no Accept: anything goes
        refused_create = http.post(
            "/consumers/g", content=b"{}", headers={"Content-Type": V2, "Accept": "text/plain"}
        )
        v2_error(refused_create, 406, 406)

        # -- consumer configs the consumer cannot take: 42204; an unknown format: 422
        def create(body: dict[str, Any]) -> httpx.Response:
            return http.post("/consumers/g", content=json.dumps(body), headers={"Content-Type": V2})

        for bad in (
            {"auto.offset.reset": "sometimes"},
            {"auto.commit.enable": "maybe"},
            {"fetch.min.bytes": "many"},
            {"consumer.request.timeout.ms": -5},
        ):
            message = v2_error(create(bad), 422, 42204)
            assert next(iter(bad)) in message and "Invalid consumer configuration" in message
        v2_error(create({"format": "xml"}), 422, 422)
        v2_error(http.post("/consumers/bad$group", content=b"{}", headers={"Content-Type": V2}),
                 422, 42204)  # fmt: skip

        # -- committing offsets answers a JSON document
        made = create({"name": "c1", "auto.offset.reset": "earliest"})
        assert made.status_code == 200, made.text
        base = "/consumers/g/instances/c1"
        assign = {"partitions": [{"topic": "t", "partition": 0}]}
        headers = {"Content-Type": V2}
        assert http.post(f"{base}/assignments", json=assign, headers=headers).status_code == 204
        commit = {"offsets": [{"topic": "t", "partition": 0, "offset": 4}]}
        committed = http.post(f"{base}/offsets", json=commit, headers=headers)
        assert committed.status_code == 200, committed.text
        assert committed.headers["content-type"] == V2
        assert committed.json() == [{"topic": "t", "partition": 0, "consumed": 4, "committed": 5}]
        again = http.post(f"{base}/offsets", content=b"", headers=headers)
        assert again.status_code == 200 and again.json() == []
        read_back = http.request("GET", f"{base}/offsets", json=assign, headers=headers)
        assert read_back.json()["offsets"][0]["offset"] == 5
        assert http.delete(base, headers=headers).status_code == 204

        # -- unknown paths name what was asked for; the '/' hint only for topic paths
        for path, body_code in (("/", 42), ("/nothing/here", 42), ("/v3/nope", 404),
                                ("/consumers", 404)):  # fmt: skip
            answer = http.get(path)
            assert answer.status_code == 404
            assert answer.json()["error_code"] == body_code
            assert answer.json()["message"] == f"no endpoint GET {path}"
        hinted = http.post("/v1/topics/a/b/records", json={"records": [{"value": "x"}]})
        assert hinted.status_code == 404
        assert "no endpoint POST /v1/topics/a/b/records" in hinted.json()["message"]
        assert "topic names cannot contain '/'" in hinted.json()["message"]
        v3_hint = http.get("/v3/clusters/lakelog/topics/a/b/c")
        assert_shape("Error", v3_hint.json())
        assert "cannot contain '/'" in v3_hint.json()["message"]

    # -- the consumer instance's calls to the broker (assign, commit, committed offsets above)
    # went over loopback HTTP; the broker's log does not show them at INFO
    lines = [line for line in broker.log().splitlines() if "HTTP Request:" in line]
    assert lines == [], "\n".join(lines[:5])


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_v2_produce_reports_refused_records_per_record(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        small = {"name": "small", "partitions": 1, "configs": {"max.message.bytes": "64"}}
        assert http.post("/v1/topics", json=small).status_code == 201
        compact = {"name": "table", "partitions": 1, "configs": {"cleanup.policy": "compact"}}
        assert http.post("/v1/topics", json=compact).status_code == 201

        big = b"x" * 200
        records = [{"value": b64(b"a")}, {"value": b64(big)}, {"value": b64(b"c")}]
        answer = http.post(
            "/topics/small", content=json.dumps({"records": records}),
            headers={"Content-Type": BINARY},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == V2
        offsets = answer.json()["offsets"]
        assert [(o["partition"], o["offset"], o["error_code"]) for o in offsets] == [
            (0, 0, None),
            (None, None, 1),
            (0, 1, None),
        ]
        assert "MESSAGE_TOO_LARGE" in offsets[1]["error"] and "64" in offsets[1]["error"]
        assert stored_values(http, "small") == [b"a", b"c"]

        # every record refused: still 200, nothing written
        alone = http.post(
            "/topics/small/partitions/0", content=json.dumps({"records": [{"value": b64(big)}]}),
            headers={"Content-Type": BINARY},
        )  # fmt: skip
        assert alone.status_code == 200, alone.text
        assert [o["error_code"] for o in alone.json()["offsets"]] == [1]
        assert stored_values(http, "small") == [b"a", b"c"]

        # a keyless record on a compacted topic, embedded JSON
        keyed = [{"key": "k1", "value": {"n": 1}}, {"value": {"n": 2}}, {"key": "k3", "value": 3}]
        answer = http.post(
            "/topics/table", content=json.dumps({"records": keyed}),
            headers={"Content-Type": JSON_V2},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        offsets = answer.json()["offsets"]
        assert [o["error_code"] for o in offsets] == [None, 1, None]
        assert "INVALID_RECORD" in offsets[1]["error"]
        assert stored_values(http, "table") == [b'{"n":1}', b"3"]

        # errors of the whole request are unchanged: nothing written
        beyond = {"records": [{"value": b64(b"a")}, {"value": b64(b"b"), "partition": 3}]}
        v2_error(
            http.post(
                "/topics/small", content=json.dumps(beyond), headers={"Content-Type": BINARY}
            ),
            404,
            40402,
        )
        assert stored_values(http, "small") == [b"a", b"c"]

        # the native API keeps its own answer: the whole request is refused
        native = http.post(
            "/v1/topics/small/records",
            json={"records": [{"value": "a"}, {"value": "x" * 200}]},
        )
        assert native.status_code == 413, native.text
        assert native.json()["error"] == "MESSAGE_TOO_LARGE"
        assert stored_values(http, "small") == [b"a", b"c"]


# -- pure pieces ---------------------------------------------------------------------------


def test_accept_header_matching() -> None:
    offered = [V2, "application/json"]
    assert acceptable(None, offered) and acceptable("  ", offered)
    assert acceptable("application/json", offered)
    assert acceptable("APPLICATION/VND.KAFKA.V2+JSON; charset=utf-8", offered)
    assert acceptable("text/*, application/*;q=0.1", offered)
    assert acceptable("*/*", offered)
    assert not acceptable("text/plain", offered)
    assert not acceptable("text/*", offered)
    assert not acceptable("application/json;q=0", offered)
    assert not acceptable("application/json;q=zero", offered)
    assert not acceptable("*/*;q=0, text/plain", offered)


def test_broker_ids_for_kafka_clients() -> None:
    assert node_id("7") == 7
    assert node_id("0") == 0
    named = node_id("broker-a")
    assert named == node_id("broker-a") and 0 <= named < 2**31
    assert named != node_id("broker-b")
    assert 0 <= node_id("99999999999") < 2**31  # too big for an int32: derived
    assert node_id("٣") != 3  # a non-ASCII digit is a name


def test_lag_summary_picks_the_largest_lag() -> None:
    urls = V3Urls("http://h:1", "c")

    def row(partition: int, current: int, end: int, member: str = "m1") -> PartitionLag:
        return PartitionLag("t", partition, current, end, member, None, "client")

    assert lag_summary_data(urls, "g", []) is None
    summary = lag_summary_data(urls, "g", [row(0, 5, 7), row(1, 1, 9, "m2"), row(2, 9, 4)])
    assert summary is not None
    assert (summary.max_lag, summary.total_lag, summary.max_lag_partition_id) == (8, 10, 1)
    assert summary.max_lag_consumer_id == "m2"
    assert summary.max_lag_partition.related == "http://h:1/v3/clusters/c/topics/t/partitions/1"


def test_internal_http_calls_log_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.internal-http")
    logger.addFilter(InternalCallsAtDebug())
    try:
        with caplog.at_level(logging.INFO):
            logger.info("HTTP Request: POST http://127.0.0.1/v1/groups/g/members")
            logger.warning("connection reset")
        assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
            ("WARNING", "connection reset")
        ]
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            logger.info("HTTP Request: heartbeat")
        assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
            ("DEBUG", "HTTP Request: heartbeat")
        ]
    finally:
        logger.filters.clear()
