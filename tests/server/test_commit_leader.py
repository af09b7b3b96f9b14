"""Two brokers append to one topic; the follower hands its group commits to the commit leader.

Every broker computes the same leader per topic from the live brokers, so
one Delta commit carries both brokers' requests: no commit race is lost and
the follower commits nothing itself, while every acknowledged record is
stored once at dense offsets (local root and S3).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from lakelog import Catalog
from server.commit_leader.router import choose_commit_leader
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.test_broker_e2e import fetch, produce
from tests.server.test_topic_commit_metrics import stored_keys
from tests.server.topic_metrics import labelled_counter, topic_counter, wait_for_live_brokers

PARTITIONS = 2
THREADS_PER_BROKER = 4
REQUESTS_PER_THREAD = 8


def test_follower_hands_its_commits_to_the_leader(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("shared", PARTITIONS)
    catalog.close()
    ids = ["b0", "b1"]
    brokers = [start_broker(root, broker_id=i, heartbeat_interval_ms=200) for i in ids]
    clients = [httpx.Client(base_url=b.url, timeout=120) for b in brokers]
    leader = ids.index(choose_commit_leader("shared", ids))
    follower = 1 - leader
    try:
        wait_for_live_brokers(clients, len(ids))

        def produce(job: tuple[int, int]) -> list[str]:
            broker, thread = job
            values = [f"b{broker}t{thread}-{i}" for i in range(REQUESTS_PER_THREAD)]
            with httpx.Client(base_url=brokers[broker].url, timeout=120) as http:
                for value in values:
                    response = http.post(
                        "/v1/topics/shared/records",
                        json={"records": [{"key": value, "value": value}]},
                    )
                    assert response.status_code == 200, response.text
            return values

        jobs = [(b, t) for t in range(THREADS_PER_BROKER) for b in (0, 1)]
        with ThreadPoolExecutor(len(jobs)) as pool:
            acked = [v for values in pool.map(produce, jobs) for v in values]

        def handoffs(broker: int, direction: str) -> float:
            return labelled_counter(
                clients[broker],
                "lakelog_commit_handoffs",
                {"topic": "shared", "direction": direction},
            )

        assert handoffs(follower, "sent") > 0
        assert handoffs(follower, "fallback") == 0
        assert handoffs(leader, "received") == handoffs(follower, "sent")
        assert handoffs(leader, "sent") == 0
        assert topic_counter(clients[follower], "lakelog_topic_commits", "shared") == 0
        for http in clients:
            assert topic_counter(http, "lakelog_topic_commit_races_lost", "shared") == 0
        assert sorted(stored_keys(root, "shared", PARTITIONS)) == sorted(acked)
        for http in clients:  # every broker names the same leader
            assert http.get("/v1/topics/shared").json()["commit_leader"] == ids[leader]
    finally:
        for client in clients:
            client.close()


def test_follower_reads_its_own_writes_and_wakes_its_long_polls(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    """Records the leader committed for the follower are visible through the follower at once.

    The follower looks for other brokers' commits only every refresh interval,
    here far longer than the long poll: only the leader's answer can tell it
    that its own records are stored.
    """
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("own", 1)
    catalog.close()
    ids = ["b0", "b1"]
    settings = {"heartbeat_interval_ms": 200, "refresh_interval_ms": 600_000}
    brokers = [start_broker(root, broker_id=i, **settings) for i in ids]
    follower = brokers[1 - ids.index(choose_commit_leader("own", ids))]
    clients = [httpx.Client(base_url=b.url, timeout=120) for b in brokers]
    try:
        wait_for_live_brokers(clients, len(ids))
        http = clients[brokers.index(follower)]
        poller = httpx.Client(base_url=follower.url, timeout=120)
        clients.append(poller)
        with ThreadPoolExecutor(1) as pool:
            poll = pool.submit(fetch, poller, "own", 0, offset=0, max_wait_ms=20_000)
            produce(http, "own", {"records": [{"value": "first"}]})
            assert [r["value"] for r in poll.result(timeout=60)["records"]] == ["first"]
            produce(http, "own", {"records": [{"value": "second"}]})
            got = fetch(http, "own", 0, offset=1)
            assert [r["value"] for r in got["records"]] == ["second"]
        assert (
            labelled_counter(
                http,
                "lakelog_commit_handoffs",
                {"topic": "own", "direction": "sent"},
            )
            == 2
        )
    finally:
        for client in clients:
            client.close()
