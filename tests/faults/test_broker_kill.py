"""kill -9 of brokers under load, at random points, with an idempotent producer failing over.

Two real broker processes share a local root; the producer is bootstrapped
with both. Each round lets a random number of records through, then SIGKILLs
the broker the producer is using at a random moment (most often with a
request lingering or committing), and starts a replacement that the producer
only learns about through the broker registry. Nothing acknowledged may be
lost and, the producer being idempotent, nothing may be stored twice, even
for requests whose answer died with the broker.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from lakelog.client import AdminClient, Producer
from lakelog.client.connection import Connection
from tests.faults.ledger import Ledger, check
from tests.faults.load import ProducerLoad, wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("make_root", ["local"], indirect=True)]

ROUNDS = 3


def test_kill_brokers_at_random_points(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    seed = random.randrange(1 << 30)
    print(f"kill points from random seed {seed}")
    rng = random.Random(seed)
    settings = {"linger_ms": 2, "heartbeat_interval_ms": 200}
    brokers = [start_broker(root, **settings), start_broker(root, **settings)]
    with AdminClient(brokers[0].url) as admin:
        admin.create_topic("kill", 3)
    ledger = Ledger()
    # Brokers started later are only found through the registry: look every second.
    connection = Connection(
        [b.url for b in brokers], metadata_max_age_ms=1_000, request_timeout_ms=10_000
    )
    producer = Producer(
        [b.url for b in brokers],
        connection=connection,
        enable_idempotence=True,
        linger_ms=2,
        request_timeout_ms=10_000,
        retry_backoff_ms=20,
        delivery_timeout_ms=90_000,
    )
    kills = 0
    with ProducerLoad(producer, "kill", ledger, max_outstanding=500) as load:
        for kills in range(ROUNDS):
            target = ledger.delivered + rng.randrange(100, 300)
            wait_for(
                lambda t=target: ledger.delivered >= t,  # type: ignore[misc]
                f"records delivered before kill {kills}",
                state=lambda: f"(sent {load.count}, delivered {ledger.delivered})",
            )
            time.sleep(rng.uniform(0.0, 0.2))
            current = producer.connection.current
            victim = next((b for b in brokers if b.url == current), brokers[0])
            victim.kill()
            brokers = [b for b in brokers if b is not victim]
            replacement = start_broker(root, **settings)
            brokers.append(replacement)
            # A client can only fail over to brokers it knows: before the next kill the
            # producer must have discovered the replacement (else every broker it knows
            # may be dead, and nothing can tell it about the live ones).
            wait_for(
                lambda r=replacement: r.url in connection.refresh_brokers(),  # type: ignore[misc]
                "the producer to discover the replacement broker",
            )
        after_kills = ledger.delivered + 300
        wait_for(
            lambda: ledger.delivered >= after_kills,
            "records delivered after the kills",
            timeout_s=120,
            state=lambda: (
                f"(sent {load.count}, delivered {ledger.delivered}, known "
                f"{connection.brokers}, alive {[b.url for b in brokers]})"
            ),
        )
    producer.flush(timeout=120)
    producer.close()
    connection.close()
    check("broker-kill-9", root, "kill", ledger, idempotent=True)
