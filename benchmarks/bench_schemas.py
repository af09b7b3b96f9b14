"""Typed topics on produce: Avro-framed records to a validating topic beside a plain one.

One broker subprocess over a temporary local root. An Avro order schema is
registered under ``<topic>-value`` of the validating topic
(``confluent.value.schema.validation=true``), and a confluent-kafka producer,
in a worker process of its own, sends the same N framed records (magic byte,
schema id, Avro binary: the bytes AvroSerializer writes, built before the
clock) to that topic and to a plain topic with no validation, in 1,000-record
batches (``batch.num.messages=1000``, ``linger.ms=50``, acks=all). The two
topics alternate, twice each, and each figure is the better of its two runs,
so a burst of other work on the machine skews both alike. The ratio is what a
typed topic costs on the produce path: framing, the subject check and decoding
for validation, then the typed ``value_fields`` column written with the bytes
(the goal: >= 0.6x).

Beside it, in this process, the cost per record of one 1,000-record batch's
typed column: the column decoder (``server/schema_registry/avro_batch.py``)
against fastavro record by record, the measured reason that decoder exists.
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_kafka import client_pool
from benchmarks.common import (
    Progress,
    Report,
    Result,
    config_for,
    load_note,
    rate,
    scratch_dir,
    settle_disk,
)
from benchmarks.servers import start_broker
from lakelog.client import AdminClient

NAME = "schemas"
DESCRIPTION = (
    "Typed topics on produce: Avro-framed records over Kafka (confluent-kafka, 1,000-record "
    "batches) to a validating, typed topic vs the same bytes to a plain topic"
)

PRODUCE = "kafka produce, Avro-framed records"
VALIDATED = "validated topic"
PLAIN = "plain binary topic"
BATCH = 1_000
PARTITIONS = 4
#: Distinct records (cycled): built before the clock, as a producer's serializer would.
DISTINCT = 256
#: The goal for a typed topic (validation and typed columns) against a plain one.
GOAL_RATIO = 0.6
DECODE = "typed column of 1,000 Avro orders"
COLUMNAR = "column decoder"
PER_RECORD = "fastavro, record by record"

ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@dataclass(frozen=True)
class SchemasBenchConfig:
    records: int  # per run; each topic runs twice
    rounds: int = 2


CONFIGS = {
    "tiny": SchemasBenchConfig(20_000, 1),
    "small": SchemasBenchConfig(1_000_000),
    "large": SchemasBenchConfig(3_000_000),
}


def framed_orders(schema_id: int, count: int) -> list[bytes]:
    """``count`` Avro-framed orders: Confluent's magic byte and id, then the datum."""
    import fastavro

    from server.schema_registry.framing import frame

    parsed = fastavro.parse_schema(ORDER_SCHEMA)
    rng = random.Random(7)
    out = []
    for i in range(count):
        datum = {
            "id": i,
            "customer": f"customer-{rng.randrange(10_000):05d}",
            "amount": round(rng.uniform(1, 500), 2),
            "paid": rng.random() < 0.8,
            "note": None if i % 3 else "gift",
        }
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, datum)
        out.append(frame(schema_id, buffer.getvalue()))
    return out


@dataclass
class Figures:
    records: int
    seconds: float
    errors: list[str] = field(default_factory=list)


def produce_framed(bootstrap: str, topic: str, records: int, values: list[bytes]) -> Figures:
    """Produce ``records`` values (cycled) as fast as the producer takes them, until acked."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 50,
            "batch.num.messages": BATCH,
            "log_level": 3,
        }
    )
    errors: list[str] = []
    acked = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            if len(errors) < 10:
                errors.append(str(err))
        else:
            acked += 1

    producer.produce(topic, values[0], on_delivery=delivered)
    if producer.flush(60) != 0:
        return Figures(0, 0.0, ["the warm-up record was not acknowledged in 60 s"])
    acked = 0
    n = len(values)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i % n], on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(600)
    seconds = time.perf_counter() - start
    if left:
        errors.append(f"{left} records not acknowledged after 600 s")
    return Figures(acked, seconds, errors)


def decode_costs(values: list[bytes], repeats: int = 200) -> dict[str, float]:
    """µs per record of one batch's typed column, by each decoder (the best of 5 timings)."""
    import dataclasses

    import numpy as np
    import pyarrow as pa

    from server.schema_registry.avro_columns import avro_columns
    from server.schema_registry.framing import HEADER_SIZE

    column = pa.array([values[i % len(values)] for i in range(BATCH)], pa.binary())
    offsets = np.frombuffer(column.buffers()[1], np.int32, BATCH + 1).astype(np.int64)
    data = memoryview(column.buffers()[2])
    starts, ends = offsets[:-1] + HEADER_SIZE, offsets[1:]
    columnar = avro_columns(ORDER_SCHEMA)
    assert columnar.batch is not None, "the column decoder takes the order schema"
    decoders = {COLUMNAR: columnar, PER_RECORD: dataclasses.replace(columnar, batch=None)}
    costs = {}
    for label, columns in decoders.items():
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                columns.typed_column(data, starts, ends)
            timings.append((time.perf_counter() - start) / (repeats * BATCH) * 1e6)
        costs[label] = min(timings)
    return costs


def register_order_schema(root: Path, subject: str) -> int:
    """The schema's id, registered in the root the broker serves (as any broker on it would)."""
    from lakelog.storage import open_storage
    from server.schema_registry.registry import SchemaRegistry
    from server.schema_registry.types import SchemaType

    registry = SchemaRegistry(open_storage(str(root)))
    return registry.register(subject, SchemaType.AVRO, json.dumps(ORDER_SCHEMA))


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``schemas`` suite at a named size (tiny, small, large)."""
    cfg = config_for(CONFIGS, size)
    logging.getLogger("lakelog").setLevel(logging.WARNING)
    report = Report(NAME)
    load_before = os.getloadavg()[0]
    best = {VALIDATED: 0.0, PLAIN: 0.0}
    with scratch_dir(workdir, "schemas") as scratch, client_pool(1) as pool:
        server = start_broker(scratch / "root", scratch)
        try:
            assert server.kafka is not None
            with AdminClient(server.url) as admin:
                admin.create_topic("orders-plain", PARTITIONS)
                admin.create_topic(
                    "orders-validated",
                    PARTITIONS,
                    configs={"confluent.value.schema.validation": "true"},
                )
            schema_id = register_order_schema(scratch / "root", "orders-validated-value")
            values = framed_orders(schema_id, DISTINCT)
            topics = {PLAIN: "orders-plain", VALIDATED: "orders-validated"}
            for round_ in range(cfg.rounds):
                for label, topic in topics.items():
                    progress(f"round {round_ + 1}: {cfg.records:,} records to the {label}")
                    settle_disk()
                    got = pool.submit(
                        produce_framed, server.kafka, topic, cfg.records, values
                    ).result()
                    if got.errors:
                        raise RuntimeError(f"produce to {topic} failed: {'; '.join(got.errors)}")
                    best[label] = max(best[label], rate(got.records, got.seconds))
        finally:
            server.stop()
    result = report.add(
        Result(
            PRODUCE,
            VALIDATED,
            "throughput",
            best[VALIDATED],
            "records/s",
            {PLAIN: best[PLAIN]},
            params={
                "records": cfg.records,
                "batch_records": BATCH,
                "partitions": PARTITIONS,
                "value_bytes": len(values[0]),
                "rounds": cfg.rounds,
            },
        )
    )
    costs = decode_costs(values)
    report.add(
        Result(
            DECODE,
            COLUMNAR,
            "decode",
            costs[COLUMNAR],
            "us/record",
            {PER_RECORD: costs[PER_RECORD]},
            higher_is_better=False,
            params={"records": BATCH},
        )
    )
    share = result.ratio(PLAIN)
    shown = "n/a" if share is None else f"{share:.2f}x"
    verdict = "met" if share is not None and share >= GOAL_RATIO else "BELOW goal"
    report.notes += [
        f"{PRODUCE}: validated and typed {best[VALIDATED]:,.0f} records/s, plain "
        f"{best[PLAIN]:,.0f} records/s: {shown} ({verdict} >= {GOAL_RATIO}x)",
        f"each figure: the better of {cfg.rounds} runs, topics alternating; one confluent-kafka "
        f"producer process, acks=all, linger.ms=50, batch.num.messages={BATCH}",
        load_note(load_before, os.getloadavg()[0]),
    ]
    return report
