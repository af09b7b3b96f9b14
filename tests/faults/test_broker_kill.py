"""kill -9 of brokers under load, at random points, with an idempotent producer failing over.

Two real broker processes share a root (a local directory, then an S3
bucket); the producer is bootstrapped with both. Each round lets a random
number of records through, waits a random moment, then SIGKILLs a broker
while it holds a produce request (lingering or committing; the transport of
the producer's connection knows which broker has requests in flight), and
starts a replacement that the producer only learns about through the broker
registry. A kill counts only if a request held by the killed broker lost its
answer: one that fell between requests is done again (bounded). Records sent
after the last kill must be acknowledged, a few hundred of them. Nothing
acknowledged may be lost and, the producer being idempotent, nothing may be
stored twice, even for requests whose answer died with the broker, and every
record sent must in the end be acknowledged.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from lakelog.client import AdminClient, Producer
from lakelog.client.connection import Connection
from tests.faults.in_flight import InFlightTransport
from tests.faults.ledger import Ledger, check
from tests.faults.load import ProducerLoad, wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize(
        "make_root", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
    ),
]

#: Kills that must each cut a produce request.
ROUNDS = 3
#: Kills allowed in all (one whose requests were all answered before it is done again).
MAX_KILLS = 3 * ROUNDS
#: Acknowledgements the producer must get after the last kill.
AFTER_KILLS = 300


@dataclass(frozen=True)
class Kill:
    """One SIGKILL: what the killed broker held, and what lost its answer."""

    #: Produce requests the broker had received and not answered when it was killed.
    held: int
    #: Of those, requests that ended without an answer (the ones the kill cut).
    cut: int
    #: Sends the producer had started and not yet settled at that moment.
    unsettled: int


def test_kill_brokers_at_random_points(
    root: RootSpec, start_broker: Callable[..., BrokerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "lakelog.client")  # a failure shows the producer's retries
    seed = random.randrange(1 << 30)
    print(f"kill points from random seed {seed}")
    rng = random.Random(seed)
    settings = {"linger_ms": 2, "heartbeat_interval_ms": 200}
    brokers = [start_broker(root, **settings), start_broker(root, **settings)]
    with AdminClient(brokers[0].url) as admin:
        admin.create_topic("kill", 3)
    ledger = Ledger()
    transport = InFlightTransport()
    # Brokers started later are only found through the registry: look every second.
    connection = Connection(
        [b.url for b in brokers],
        metadata_max_age_ms=1_000,
        request_timeout_ms=10_000,
        transport=transport,
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
    kills: list[Kill] = []
    with ProducerLoad(producer, "kill", ledger, max_outstanding=500) as load:
        while sum(1 for k in kills if k.cut) < ROUNDS:
            assert len(kills) < MAX_KILLS, f"{len(kills)} kills cut too few requests: {kills}"
            target = ledger.acknowledgements + rng.randrange(100, 300)
            wait_for(
                lambda t=target: ledger.acknowledgements >= t,  # type: ignore[misc]
                f"records acknowledged before kill {len(kills)}",
                state=lambda: f"(sent {load.count}, acknowledged {ledger.acknowledgements})",
                load=load,
            )
            time.sleep(rng.uniform(0.0, 0.2))
            victim = holding_a_request(transport, brokers, load)
            held = transport.in_flight(victim.url)
            unsettled = ledger.unsettled
            victim.kill()
            wait_for(
                lambda h=held: transport.settled(h),  # type: ignore[misc]
                "the killed broker's requests to end",
            )
            kills.append(Kill(len(held), len(transport.cut(held)), unsettled))
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
        recovered = ledger.mark()
        sent_before = load.count
        # Not only the retries of what the kills interrupted: records sent afterwards.
        wait_for(
            lambda: load.acknowledged(sent_before + AFTER_KILLS),
            f"the {AFTER_KILLS}th record sent after the kills to be acknowledged",
            timeout_s=120,
            state=lambda: (
                f"(sent {load.count}, acknowledged {ledger.acknowledgements}, known "
                f"{connection.brokers}, alive {[b.url for b in brokers]}, errors "
                f"{ledger.errors.most_common(3)})\n"
                + "\n".join(f"log of {b.url}:\n{b.log_tail(3000)}" for b in brokers)
            ),
            load=load,
        )
    producer.flush(timeout=120)
    producer.close()
    connection.close()
    print(f"kills: {kills}")
    for kill in kills:
        assert kill.unsettled > 0, kill
    check(
        "broker-kill-9",
        root,
        "kill",
        ledger,
        idempotent=True,
        recovered=recovered,
        min_acknowledged_after=AFTER_KILLS,
    )


def holding_a_request(
    transport: InFlightTransport, brokers: list[BrokerProcess], load: ProducerLoad
) -> BrokerProcess:
    """The live broker holding the most produce requests, as soon as one holds any."""
    found: list[BrokerProcess] = []

    def look() -> bool:
        busiest = transport.busiest()
        found[:] = [b for b in brokers if b.url == busiest]
        return bool(found)

    wait_for(look, "a broker holding a produce request", timeout_s=30, load=load)
    return found[0]
