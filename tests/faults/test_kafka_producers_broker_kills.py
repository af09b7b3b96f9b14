"""kill -9 of brokers, the topic's commit leader among them, under idempotent Kafka producers.

Three brokers share a root; four unmodified confluent-kafka producers
(``enable.idempotence``, acks=all) are bootstrapped with all three and keep
sending keyed records, while a lag monitor asks every broker for the
topic's offsets (so each broker reads the topic, and its view of the
producers' sequences is whatever it read last). Brokers are killed one at a time and started again
under the same id: the topic's commit leader, then another broker, then the
leader once more (it leads again once it is back). Kafka keeps a producer's
sequence state across a leader's death, so the producers' retries must be
accepted, never refused: the test fails on any fatal producer error and on
any failed delivery report, besides the ledger's checks (nothing
acknowledged lost, nothing stored twice, offsets dense) on a local and an
S3 root.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, Producer

from server.commit_leader.router import choose_commit_leader
from tests.faults.ledger import Ledger, check
from tests.faults.load import wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.test_produce_consume import create_topic
from tests.server.topic_metrics import wait_for_live_brokers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize(
        "make_root", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
    ),
]

TOPIC = "kills"
BROKER_IDS = ["b0", "b1", "b2"]
PRODUCERS = 4
#: Acknowledgements between one kill and the next, and after the last.
BETWEEN_KILLS = 600
#: How often the lag monitor asks each broker: longer than a takeover (a broker session).
MONITOR_INTERVAL_S = 3.0
SETTINGS = {"linger_ms": 2}


class IdempotentProducer:
    """One confluent-kafka producer thread sending ``p<n>-<i>`` until stopped."""

    def __init__(self, n: int, bootstrap: str, ledger: Ledger) -> None:
        self.prefix = f"p{n}"
        self.ledger = ledger
        self.fatal: list[str] = []
        self.failed: list[str] = []
        self.sent = 0
        self.error: BaseException | None = None
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 180_000,
                "error_cb": self._on_error,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal.append(str(error))

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        value = bytes(message.value())
        if error is not None:
            self.failed.append(str(error))
            self.ledger.failed(value, str(error))
        else:
            self.ledger.ack(value, message.partition(), message.offset())

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                value = f"{self.prefix}-{self.sent}".encode()
                key = b"k%d" % (self.sent % 17)
                while len(self.producer) > 1_000 and not self._stop.is_set():
                    self.producer.poll(0.01)  # a steady stream, not an unbounded queue
                self.producer.produce(TOPIC, value, key, on_delivery=self._delivered)
                self.sent += 1
                self.producer.poll(0)
            remaining = self.producer.flush(240)
            assert remaining == 0, f"{self.prefix}: {remaining} records never settled"
        except BaseException as exc:  # raised again in the test's thread by check()
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(300)
        assert not self._thread.is_alive(), f"{self.prefix} did not stop"

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.prefix} failed: {self.error!r}") from self.error
        assert not self.fatal, f"{self.prefix} failed fatally: {self.fatal}"


class LagMonitor:
    """Asks each live broker for the topic's offsets every few seconds, as lag tools do.

    Each answer has the broker read the topic, so a broker that takes over
    from a dead leader holds a view of the producers' sequences as old as its
    last answer: mostly from before the kill, since the monitor asks less
    often than a takeover takes.
    """

    def __init__(self, brokers: dict[str, BrokerProcess]) -> None:
        self.brokers = brokers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(MONITOR_INTERVAL_S):
            for broker in list(self.brokers.values()):
                # A broker being killed or started answers nothing: the next round asks again.
                with contextlib.suppress(httpx.HTTPError):
                    httpx.get(f"{broker.url}/v1/topics/{TOPIC}/offsets", timeout=5)

    def __enter__(self) -> LagMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_idempotent_kafka_producers_survive_kills_of_the_commit_leader(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    brokers = {i: start_broker(root, broker_id=i, **SETTINGS) for i in BROKER_IDS}
    live_brokers(brokers)
    create_topic(brokers["b0"], TOPIC, partitions=3)
    leader = choose_commit_leader(TOPIC, BROKER_IDS)
    other = next(i for i in BROKER_IDS if i != leader)
    bootstrap = ",".join(str(b.kafka) for b in brokers.values())
    ledger = Ledger()
    producers = [IdempotentProducer(n, bootstrap, ledger) for n in range(PRODUCERS)]
    for producer in producers:
        producer.start()

    def healthy() -> bool:
        """True, or the first producer's fatal error or failed delivery as a failure."""
        for producer in producers:
            producer.check()
            assert not producer.failed, f"{producer.prefix}: {producer.failed[:3]}"
        return True

    def acknowledged_more(what: str) -> None:
        target = ledger.acknowledgements + BETWEEN_KILLS
        wait_for(
            lambda: healthy() and ledger.acknowledgements >= target,
            what,
            timeout_s=180,
            state=lambda: f"(acknowledged {ledger.acknowledgements} of {target})",
        )

    try:
        with LagMonitor(brokers):
            acknowledged_more("acknowledgements before the first kill")
            for victim in (leader, other, leader):
                brokers[victim].kill()
                acknowledged_more(f"acknowledgements after {victim} was killed")
                brokers[victim] = start_broker(root, broker_id=victim, **SETTINGS)
                live_brokers(brokers)
            recovered = ledger.mark()
            acknowledged_more("acknowledgements after the last restart")
    finally:
        for producer in producers:
            producer.stop()
    healthy()
    check(
        "kafka-idempotent-kill-9",
        root,
        TOPIC,
        ledger,
        idempotent=True,
        recovered=recovered,
        min_acknowledged_after=BETWEEN_KILLS,
    )


def live_brokers(brokers: dict[str, BrokerProcess]) -> None:
    """Until every broker sees all of them live (and so agrees on the commit leader)."""
    clients = [httpx.Client(base_url=b.url, timeout=30) for b in brokers.values()]
    try:
        wait_for_live_brokers(clients, len(brokers))
    finally:
        for client in clients:
            client.close()
