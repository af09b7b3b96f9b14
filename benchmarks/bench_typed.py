"""Kafka produce to a typed topic against the same payloads to a plain binary topic.

``python -m benchmarks.bench_typed [--records N] [--rounds R]``: one broker; two
topics of one partition, ``plain`` and ``typed`` (``confluent.value.schema.validation``,
so values are checked on produce and decoded into ``value_fields`` where rows are
staged); the same Avro-framed order records (about 60 bytes) produced to each by
confluent-kafka in batches of 1,000 records, closed loop, the topics alternating
round by round. Prints records/s of each and their ratio (the goal is >= 0.6), and
the in-process cost per record of the decoding alone.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pyarrow as pa

from benchmarks.servers import start_broker
from lakelog.storage import open_storage
from server.schema_registry.framing import frame
from server.schema_registry.registry import SchemaRegistry
from server.schema_registry.typed_columns import RegistryColumns
from server.schema_registry.types import ParsedSchema, SchemaType

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
BATCH_RECORDS = 1_000


def payloads(schema_id: int, count: int = 64) -> list[bytes]:
    parsed = fastavro.parse_schema(ORDER)
    out = []
    for i in range(count):
        body = io.BytesIO()
        record = {
            "id": i,
            "customer": f"customer-{i % 17}",
            "amount": i * 1.25,
            "placed": 1_700_000_000_000 + i,
            "note": None if i % 3 else f"note {i}",
        }
        fastavro.schemaless_writer(body, parsed, record)
        out.append(frame(schema_id, body.getvalue()))
    return out


def produce(bootstrap: str, topic: str, values: list[bytes], records: int) -> float:
    """Records/s of ``records`` values produced and acknowledged (acks=all)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.num.messages": BATCH_RECORDS,
            "enable.idempotence": False,
            "log_level": 3,
        }
    )
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer.produce(topic, values[0], on_delivery=delivered)
    producer.flush(60)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i & 63], on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush(600)
    seconds = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{topic}: {errors}")
    return records / seconds


def decode_cost(schema_id: int, values: list[bytes], records: int) -> float:
    """µs per record of ``RegistryColumns.typed`` on one column of ``records`` values."""
    text = json.dumps(ORDER)
    parsed = ParsedSchema(SchemaType.AVRO, text, text)
    columns = RegistryColumns(lambda _id: parsed)
    column = pa.array([values[i & 63] for i in range(records)], pa.binary())
    columns.typed(column, None)
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        columns.typed(column, None)
        runs.append((time.perf_counter() - start) / records * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        root = scratch / "root"
        server = start_broker(root, scratch)
        try:
            assert server.kafka is not None
            for topic, configs in (
                ("plain", {}),
                ("typed", {"confluent.value.schema.validation": "true"}),
            ):
                response = httpx.post(
                    f"{server.url}/v1/topics",
                    json={"name": topic, "partitions": 1, "configs": configs},
                    timeout=60,
                )
                response.raise_for_status()
            registry = SchemaRegistry(open_storage(str(root)))
            schema_id = registry.register("typed-value", SchemaType.AVRO, json.dumps(ORDER))
            values = payloads(schema_id)
            figures: dict[str, list[float]] = {"plain": [], "typed": []}
            for _ in range(args.rounds):
                for topic in figures:
                    figures[topic].append(produce(server.kafka, topic, values, args.records))
            plain = statistics.median(figures["plain"])
            typed = statistics.median(figures["typed"])
            print(f"plain binary topic: {plain:,.0f} records/s  (rounds: {figures['plain']})")
            print(f"typed Avro topic:   {typed:,.0f} records/s  (rounds: {figures['typed']})")
            print(f"ratio typed/plain:  {typed / plain:.2f}  (goal >= 0.6)")
            cost = decode_cost(schema_id, values, 100_000)
            print(f"decoding into value_fields alone: {cost:.2f} µs/record")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
