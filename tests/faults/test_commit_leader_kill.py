"""kill -9 of a topic's commit leader while the other brokers hand it their group commits.

Three brokers share a root; an idempotent producer, bootstrapped with the two
that are not the topic's commit leader, sends through them, so their groups
go to the leader. The leader is killed mid-load, while handoffs are under
way: their answers die with it (the records may or may not be stored), the
producer retries, and the other brokers commit their groups themselves until
the registry forgets the dead broker and a new leader takes over. Nothing
acknowledged may be lost, nothing stored twice, and records sent afterwards
must be acknowledged (local root and S3).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from lakelog.client import AdminClient, Producer
from server.commit_leader.router import choose_commit_leader
from tests.faults.ledger import Ledger, check
from tests.faults.load import ProducerLoad, records_on_their_way, wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.topic_metrics import labelled_counter, wait_for_live_brokers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize(
        "make_root", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
    ),
]

#: Acknowledgements the producer must get after the kill.
AFTER_KILL = 300


def test_kill_the_commit_leader_mid_load(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    ids = ["b0", "b1", "b2"]
    settings = {"linger_ms": 2, "heartbeat_interval_ms": 200, "broker_session_timeout_ms": 2_000}
    brokers = {i: start_broker(root, broker_id=i, **settings) for i in ids}
    leader = choose_commit_leader("kill", ids)
    others = [brokers[i] for i in ids if i != leader]
    clients = [httpx.Client(base_url=b.url, timeout=30) for b in brokers.values()]
    wait_for_live_brokers(clients, len(ids))
    for client in clients:
        client.close()
    with AdminClient(others[0].url) as admin:
        admin.create_topic("kill", 3)
    ledger = Ledger()
    producer = Producer(
        [b.url for b in others],
        enable_idempotence=True,
        linger_ms=2,
        request_timeout_ms=10_000,
        retry_backoff_ms=20,
        delivery_timeout_ms=90_000,
    )

    def handed_off() -> float:
        total = 0.0
        for broker in others:
            with httpx.Client(base_url=broker.url, timeout=30) as http:
                total += labelled_counter(
                    http, "lakelog_commit_handoffs", {"topic": "kill", "direction": "sent"}
                )
        return total

    with ProducerLoad(producer, "kill", ledger, max_outstanding=500) as load:
        wait_for(
            lambda: ledger.acknowledgements >= 300 and handed_off() > 0,
            "acknowledgements of records handed to the commit leader",
            load=load,
        )
        unsettled = records_on_their_way(ledger, load)
        brokers[leader].kill()
        recovered = ledger.mark()
        sent_before = load.count
        wait_for(
            lambda: load.acknowledged(sent_before + AFTER_KILL),
            f"the {AFTER_KILL}th record sent after the kill to be acknowledged",
            timeout_s=120,
            state=lambda: f"(sent {load.count}, acknowledged {ledger.acknowledgements})",
            load=load,
        )
    producer.flush(timeout=120)
    producer.close()
    assert unsettled > 0, "the kill must interrupt records on their way"
    check(
        "commit-leader-kill-9",
        root,
        "kill",
        ledger,
        idempotent=True,
        recovered=recovered,
        min_acknowledged_after=AFTER_KILL,
    )
