"""One consumer group member in its own process, so a test can SIGKILL it.

``python -m tests.server.kafka.group_member CLIENT BOOTSTRAP TOPIC GROUP OUT STOP``
subscribes with the named client library's defaults (plus a short session
timeout), appends ``partition offset`` of every record it gets to OUT
(flushed per batch), commits synchronously after each batch, and leaves the
group cleanly once the file STOP exists.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TextIO

SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_MS = 1_000


def record(out: TextIO, positions: list[tuple[int, int]]) -> None:
    out.writelines(f"{p} {o}\n" for p, o in positions)
    out.flush()
    os.fsync(out.fileno())


def confluent(bootstrap: str, topic: str, group: str, out: TextIO, stop: Path) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
        }
    )
    consumer.subscribe([topic])
    while not stop.exists():
        messages = [m for m in consumer.consume(500, 0.5) if not m.error()]
        if messages:
            record(out, [(int(m.partition() or 0), int(m.offset() or 0)) for m in messages])
            consumer.commit(asynchronous=False)
    consumer.close()


def kafka_python(bootstrap: str, topic: str, group: str, out: TextIO, stop: Path) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    while not stop.exists():
        batches = consumer.poll(timeout_ms=500)
        positions = [(r.partition, r.offset) for rs in batches.values() for r in rs]
        if positions:
            record(out, positions)
            consumer.commit()
    consumer.close()


def aiokafka(bootstrap: str, topic: str, group: str, out: TextIO, stop: Path) -> None:
    from aiokafka import AIOKafkaConsumer

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        await consumer.start()
        while not stop.exists():
            batches = await consumer.getmany(timeout_ms=500)
            positions = [(r.partition, r.offset) for rs in batches.values() for r in rs]
            if positions:
                record(out, positions)
                await consumer.commit()
        await consumer.stop()

    asyncio.run(run())


MEMBERS = {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}

if __name__ == "__main__":
    client, bootstrap, topic, group, out_path, stop_path = sys.argv[1:7]
    with open(out_path, "a") as out:
        MEMBERS[client](bootstrap, topic, group, out, Path(stop_path))
