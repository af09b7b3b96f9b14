"""Many first requests for a topic at once: the broker opens it once (local root and S3).

Every open of a topic in a process has its own write lock; two of them in
one broker would race each other for the table's next Delta version, and
the loser's clients wait while it retries. Here a broker that has never
opened the topic gets many produce requests for it at the same moment;
with one open there is no rival writer, so no commit race can be lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from lakelog import Catalog
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.topic_metrics import read_partition, topic_counter

THREADS = 32
PARTITIONS = 2
RECORDS_PER_REQUEST = 3


def test_concurrent_first_requests_open_the_topic_once(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    # Created outside the broker: creating through it would open the topic there first.
    creator = Catalog(root.url, s3=root.s3)
    creator.create_topic("hot", PARTITIONS)
    creator.close()

    clients = [httpx.Client(base_url=broker.url, timeout=120) for _ in range(THREADS)]
    gate = threading.Barrier(THREADS)

    def produce(n: int) -> list[tuple[str, int, int]]:
        values = [f"t{n}-{i}" for i in range(RECORDS_PER_REQUEST)]
        body = {"records": [{"key": v, "value": v} for v in values]}
        gate.wait()
        response = clients[n].post("/v1/topics/hot/records", json=body)
        assert response.status_code == 200, response.text
        placed = response.json()["records"]
        return [(v, r["partition"], r["offset"]) for v, r in zip(values, placed, strict=True)]

    try:
        with ThreadPoolExecutor(THREADS) as pool:
            acked = [a for placed in pool.map(produce, range(THREADS)) for a in placed]
        http = clients[0]
        assert topic_counter(http, "lakelog_topic_opens", "hot") == 1
        assert topic_counter(http, "lakelog_topic_commit_races_lost", "hot") == 0
        assert topic_counter(http, "lakelog_topic_commit_retries", "hot") == 0
        assert topic_counter(http, "lakelog_topic_commits", "hot") >= 1

        assert len(acked) == THREADS * RECORDS_PER_REQUEST
        stored = {
            r["value"]: (p, r["offset"])
            for p in range(PARTITIONS)
            for r in read_partition(http, "hot", p)
        }
        assert stored == {v: (p, o) for v, p, o in acked}
        for p in range(PARTITIONS):
            offsets = sorted(o for _, q, o in acked if q == p)
            assert offsets == list(range(len(offsets))), p
    finally:
        for client in clients:
            client.close()
