"""The object store unreachable for a while: retriable errors, recovery without restart.

The broker reaches moto through a TCP proxy; stopping the proxy makes the
store refuse and reset connections (moto itself keeps running, so no stored
object is lost, as with a real store's outage). During the outage a produce
gets a retriable error (503 KAFKA_STORAGE_ERROR or a timeout), the idempotent
producer keeps retrying, and once the store is back the same broker process
commits again: records sent after the outage must be acknowledged, a few
hundred of them, and every record sent must in the end be acknowledged. Nothing acknowledged
is lost, nothing is stored twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from lakelog.client import AdminClient, Producer
from tests.faults.conftest import ProxiedRoot
from tests.faults.ledger import Ledger, check
from tests.faults.load import ProducerLoad, wait_for
from tests.fixtures.brokers import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.s3]

OUTAGE_S = 4.0
#: Acknowledgements the producer must get once the store is back.
AFTER_OUTAGE = 300


def test_store_outage_gives_retriable_errors_and_the_broker_recovers(
    proxied_root: ProxiedRoot, start_broker: Callable[..., BrokerProcess]
) -> None:
    root, proxy = proxied_root.root, proxied_root.proxy
    broker = start_broker(root, linger_ms=2, max_block_ms=500, **proxied_root.broker_settings)
    pid = broker.process.pid
    with AdminClient(broker.url) as admin:
        admin.create_topic("outage", 2)
    ledger = Ledger()
    producer = Producer(
        broker.url,
        enable_idempotence=True,
        linger_ms=2,
        request_timeout_ms=10_000,
        retry_backoff_ms=50,
        delivery_timeout_ms=90_000,
    )
    with ProducerLoad(producer, "outage", ledger, max_outstanding=500) as load:
        wait_for(
            lambda: ledger.acknowledgements >= 300,
            "records acknowledged before the outage",
            load=load,
        )
        proxy.stop()
        before = ledger.acknowledgements
        # A request of its own shows what a client sees while the store is down.
        with httpx.Client(base_url=broker.url, timeout=60) as http:
            answer = http.post(
                "/v1/topics/outage/records",
                json={"records": [{"value": "during-outage"}]},
            )
        ledger.probe(b"during-outage")
        time.sleep(OUTAGE_S)
        acknowledged_during = ledger.acknowledgements - before
        sent_during = load.count
        proxy.start()
        recovered = ledger.mark()
        # Not only the retries of what waited out the outage: records sent afterwards.
        wait_for(
            lambda: load.acknowledged(sent_during + AFTER_OUTAGE),
            f"the {AFTER_OUTAGE}th record sent after the outage to be acknowledged",
            state=lambda: f"(sent {load.count}, acknowledged {ledger.acknowledgements})",
            load=load,
        )
    producer.flush(timeout=120)
    producer.close()
    print(f"outage probe: HTTP {answer.status_code} {answer.text[:200]}")
    print(
        f"acknowledged during the outage: {acknowledged_during}; "
        f"producer errors: {dict(ledger.errors)}"
    )
    assert answer.status_code in (503, 408, 504), answer.text
    body = answer.json()
    assert body["retriable"] is True, body
    assert broker.process.poll() is None and broker.process.pid == pid, "broker restarted"
    check(
        "store-outage",
        root,
        "outage",
        ledger,
        idempotent=True,
        recovered=recovered,
        min_acknowledged_after=AFTER_OUTAGE,
    )
