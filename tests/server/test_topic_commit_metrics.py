"""Two brokers append to one topic at once; ``/metrics`` shows each one's commits and races.

With commit handoff off, the brokers share the table with no coordinator, so each commit either
takes the next Delta version or loses it to the other broker and is made
again at the one after. The counters must tell an operator both: every
broker's commits (which together are every version the table gained) and
the races lost on the way (local root and S3).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from lakelog import Catalog
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.topic_metrics import topic_counter

PARTITIONS = 2
THREADS_PER_BROKER = 4
REQUESTS_PER_THREAD = 6
#: Rounds of concurrent appends tried until a race was lost (bounds the test, not its speed).
MAX_ROUNDS = 6


def test_commits_and_lost_races_per_topic(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    catalog = Catalog(root.url, s3=root.s3)
    created = catalog.create_topic("shared", PARTITIONS).version
    # Without commit leaders, so that the brokers race (the race path is what a broker
    # falls back to when the leader cannot be reached).
    brokers = [start_broker(root, commit_handoff=False) for _ in range(2)]
    clients = [httpx.Client(base_url=b.url, timeout=120) for b in brokers]

    def produce(job: tuple[int, str]) -> list[str]:
        broker, name = job
        values = [f"{name}-{i}" for i in range(REQUESTS_PER_THREAD)]
        with httpx.Client(base_url=brokers[broker].url, timeout=120) as http:
            for value in values:
                response = http.post(
                    "/v1/topics/shared/records", json={"records": [{"key": value, "value": value}]}
                )
                assert response.status_code == 200, response.text
        return values

    def counters(family: str) -> list[float]:
        return [topic_counter(http, family, "shared") for http in clients]

    try:
        # Each broker commits its own appends: no broker is named the topic's commit leader.
        assert clients[0].get("/v1/topics/shared").json()["commit_leader"] is None
        acked: list[str] = []
        for round_ in range(MAX_ROUNDS):
            jobs = [(b, f"r{round_}b{b}t{t}") for t in range(THREADS_PER_BROKER) for b in (0, 1)]
            with ThreadPoolExecutor(len(jobs)) as pool:
                acked += [value for values in pool.map(produce, jobs) for value in values]
            if sum(counters("lakelog_topic_commit_races_lost")) > 0:
                break
        commits = counters("lakelog_topic_commits")
        lost = counters("lakelog_topic_commit_races_lost")
        retries = counters("lakelog_topic_commit_retries")
        print(f"commits {commits}, lost races {lost}, retries {retries} after {round_ + 1} rounds")
        assert all(c > 0 for c in commits), commits
        assert sum(lost) > 0, f"no race lost in {MAX_ROUNDS} rounds"
        # Every request succeeded, so no commit was given up: each lost race was retried.
        assert retries == lost
        # The brokers are the table's only writers: their commits are its new versions.
        assert sum(commits) == catalog.describe_topic("shared").version - created
        stored = stored_keys(root, "shared", PARTITIONS)
        assert sorted(stored) == sorted(acked)
    finally:
        for client in clients:
            client.close()
        catalog.close()


def stored_keys(root: RootSpec, topic: str, partitions: int) -> list[str]:
    """Every key the topic holds, read from storage by a catalog opened after the load.

    A broker's own view may lag the other broker's last commit by its refresh
    interval; storage is what every reader sees once the acknowledgements are in.
    """
    catalog = Catalog(root.url, s3=root.s3)
    try:
        log = catalog.topic(topic)
        keys: list[str] = []
        for partition in range(partitions):
            offset = 0
            while offset < log.high_watermark(partition):
                got = log.read(partition, offset)
                assert got.records.column("offset").to_pylist() == list(
                    range(offset, got.next_offset)
                ), "offsets are dense"
                keys += [bytes(k).decode() for k in got.records.column("key").to_pylist()]
                offset = got.next_offset
        return keys
    finally:
        catalog.close()
