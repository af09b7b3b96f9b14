"""Two broker processes on one storage root, written to at the same time.

No broker coordinates with the other: offsets come from the Delta commit
protocol alone. Every acknowledged record must have a unique offset, offsets
must be dense, and either broker must serve every record, including to a
consumer long-polling one broker while the other one writes.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.topic_metrics import read_partition

PARTITIONS = 3
THREADS_PER_BROKER = 3
REQUESTS_PER_THREAD = 8
RECORDS_PER_REQUEST = 4


def test_two_brokers_on_one_root(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    brokers = [start_broker(root, fetch_max_wait_ms=120_000) for _ in range(2)]
    first, second = (httpx.Client(base_url=b.url, timeout=60) for b in brokers)
    try:
        created = first.post("/v1/topics", json={"name": "shared", "partitions": PARTITIONS})
        assert created.status_code == 201, created.text
        # Both brokers list each other in the registry.
        for http in (first, second):
            listed = {b["url"] for b in http.get("/v1/brokers").json()["brokers"]}
            assert listed == {b.url for b in brokers}

        acked: dict[str, tuple[int, int]] = {}  # value -> (partition, offset)
        lock = threading.Lock()

        def producer(broker: BrokerProcess, name: str) -> None:
            with httpx.Client(base_url=broker.url, timeout=60) as http:
                for i in range(REQUESTS_PER_THREAD):
                    values = [f"{name}-{i}-{j}" for j in range(RECORDS_PER_REQUEST)]
                    body = {"records": [{"key": v, "value": v} for v in values]}
                    response = http.post("/v1/topics/shared/records", json=body)
                    assert response.status_code == 200, response.text
                    placed = response.json()["records"]
                    with lock:
                        for v, r in zip(values, placed, strict=True):
                            acked[v] = (r["partition"], r["offset"])

        with ThreadPoolExecutor(2 * THREADS_PER_BROKER) as pool:
            futures = [
                pool.submit(producer, broker, f"b{b}t{t}")
                for t in range(THREADS_PER_BROKER)
                for b, broker in enumerate(brokers)
            ]
            for future in futures:
                future.result()

        total = 2 * THREADS_PER_BROKER * REQUESTS_PER_THREAD * RECORDS_PER_REQUEST
        assert len(acked) == total
        by_partition: dict[int, list[int]] = defaultdict(list)
        for partition, offset in acked.values():
            by_partition[partition].append(offset)
        assert len(by_partition) > 1
        for partition, offsets in by_partition.items():
            # Unique and dense: exactly 0..n-1, each acknowledged once.
            assert sorted(offsets) == list(range(len(offsets))), partition

        for http in (first, second):
            watermarks = [
                p["high_watermark"]
                for p in http.get("/v1/topics/shared/offsets").json()["partitions"]
            ]
            assert watermarks == [len(by_partition[p]) for p in range(PARTITIONS)]
        for partition in range(PARTITIONS):
            from_first = read_partition(first, "shared", partition, page=50)
            from_second = read_partition(second, "shared", partition, page=50)
            assert from_first == from_second
            assert [r["offset"] for r in from_first] == list(range(len(from_first)))
            for record in from_first:
                assert acked[record["value"]] == (partition, record["offset"])
                assert record["key"] == record["value"]
        # A thread waits for each answer before sending on, so within a partition its
        # records appear in the order it sent them.
        for partition in range(PARTITIONS):
            seen: dict[str, int] = {}
            for record in read_partition(second, "shared", partition, page=50):
                thread, i, j = record["value"].rsplit("-", 2)
                position = int(i) * RECORDS_PER_REQUEST + int(j)
                assert position > seen.get(thread, -1), record
                seen[thread] = position

        check_long_poll_sees_the_other_brokers_writes(first, second, "relay-ab")
        check_long_poll_sees_the_other_brokers_writes(second, first, "relay-ba")
    finally:
        first.close()
        second.close()


def check_long_poll_sees_the_other_brokers_writes(
    a: httpx.Client, b: httpx.Client, topic: str
) -> None:
    """A consumer long-polling broker B gets what is produced through broker A."""
    created = a.post("/v1/topics", json={"name": topic, "partitions": 2})
    assert created.status_code == 201, created.text
    sent = a.post(
        f"/v1/topics/{topic}/records", json={"records": [{"value": "before", "partition": 1}]}
    )
    assert sent.status_code == 200, sent.text
    # B learns of the topic and its first record from storage alone.
    got = b.get(f"/v1/topics/{topic}/partitions/1/records", params={"offset": 0}).json()
    assert [r["value"] for r in got["records"]] == ["before"]

    with ThreadPoolExecutor(1) as pool:
        for round_ in range(3):
            # Up to 120 s of waiting; the 60 s client timeout fails the test instead.
            poll = pool.submit(
                b.get,
                f"/v1/topics/{topic}/partitions/1/records",
                params={"offset": got["next_offset"], "max_wait_ms": 120_000},
            )
            time.sleep(0.3)  # let the poll start waiting (the test holds either way)
            values = [f"relayed-{round_}-{i}" for i in range(2)]
            body = {"records": [{"value": v, "partition": 1} for v in values]}
            response = a.post(f"/v1/topics/{topic}/records", json=body)
            assert response.status_code == 200, response.text
            answer = poll.result()
            assert answer.status_code == 200, answer.text
            got = answer.json()
            # One request is one commit, so the poll sees all of it at once.
            assert [r["value"] for r in got["records"]] == values
            assert got["next_offset"] == 1 + 2 * (round_ + 1)
