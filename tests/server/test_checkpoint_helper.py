"""A broker's Delta checkpoints come from its helper process, which dies with the broker."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from lakelog.catalog import Catalog
from lakelog.storage import join
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import eventually

StartBroker = Callable[..., BrokerProcess]
HELPER_MODULE = "lakelog.delta.checkpoint_process"


def _helpers(broker: BrokerProcess) -> list[psutil.Process]:
    children = psutil.Process(broker.process.pid).children()
    return [c for c in children if HELPER_MODULE in " ".join(c.cmdline())]


def _metrics(broker: BrokerProcess) -> dict[str, float]:
    """The checkpoint helper's events from the broker's /metrics, by event."""
    text = httpx.get(f"{broker.url}/metrics").text
    return {
        sample.labels["event"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "lakelog_checkpoint_helper_events"
    }


def _last_checkpoint(root: RootSpec, topic: str) -> int | None:
    catalog = Catalog(root.url, s3=root.s3)
    try:
        path = join(catalog.topic(topic).table_path, "_delta_log", "_last_checkpoint")
        try:
            return int(json.loads(catalog.storage.read_bytes(path))["version"])
        except FileNotFoundError:
            return None
    finally:
        catalog.close()


def test_checkpoints_are_written_by_the_helper_which_ends_with_a_killed_broker(
    root: RootSpec, start_broker: StartBroker
) -> None:
    broker = start_broker(root, checkpoint_interval=3)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        assert http.post("/v1/topics", json={"name": "t", "partitions": 2}).status_code == 201
        for i in range(7):  # commits 1..7 after the topic's creation at 0
            body = {"records": [{"key": f"k{i}", "value": f"v{i}"}]}
            response = http.post("/v1/topics/t/records", json=body, params={"acks": "all"})
            assert response.status_code == 200, response.text
    # At 6, or at 7 if the helper first opened the table after the last commit.
    eventually(lambda: (_last_checkpoint(root, "t") or 0) >= 6)
    (helper,) = _helpers(broker)
    assert helper.nice() == 10  # background work yields the cores to the broker
    assert "checkpoint helper" not in broker.log()  # no failure was logged
    metrics = _metrics(broker)
    assert metrics["written"] >= 1  # one or two: requests may merge
    assert metrics["failed"] == 0
    assert metrics["restarted"] == 0
    # The helper was handed every commit this broker made; it read only the topic's
    # creation (commit 0, written by the catalog, not by a committer) from storage.
    assert metrics["commits_read"] == 1
    assert "checkpoint of" not in broker.log()

    broker.kill()
    eventually(lambda: not helper.is_running() or helper.status() == psutil.STATUS_ZOMBIE)

    # A new broker on the same root starts from that checkpoint and has every record.
    again = start_broker(root)
    with httpx.Client(base_url=again.url, timeout=60) as http:
        values = []
        for partition in (0, 1):
            response = http.get(
                f"/v1/topics/t/partitions/{partition}/records",
                params={"offset": "earliest", "value_format": "string"},
            )
            assert response.status_code == 200, response.text
            values += [r["value"] for r in response.json()["records"]]
    assert sorted(values) == sorted(f"v{i}" for i in range(7))


def test_a_broker_can_keep_checkpoints_on_its_own_thread(
    root: RootSpec, start_broker: StartBroker
) -> None:
    broker = start_broker(root, checkpoint_interval=2, checkpoint_process="false")
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        assert http.post("/v1/topics", json={"name": "t", "partitions": 1}).status_code == 201
        for i in range(4):
            body = {"records": [{"value": f"v{i}"}]}
            assert http.post("/v1/topics/t/records", json=body).status_code == 200
    eventually(lambda: _last_checkpoint(root, "t") == 4)
    assert _helpers(broker) == []
