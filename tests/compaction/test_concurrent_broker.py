"""Compaction and retention while a real broker process takes acks=all produces and fetches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from pyspark.sql import SparkSession

from compaction.compact import compact_topic
from compaction.retention import apply_retention
from lakelog import Catalog
from tests.compaction.helpers import DAY, T0, read_all
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

PRODUCERS = 2
MAX_REQUESTS = 2_000
ROUNDS = 2
OLD_REQUESTS = 12  # each producer's first requests carry timestamps past retention.ms
KEYS = 16


@dataclass(frozen=True)
class Ack:
    partition: int
    offset: int
    key: bytes
    value: bytes
    old: bool


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_maintenance_while_a_broker_produces(
    root: RootSpec,
    catalog: Catalog,
    make_catalog: Callable[..., Catalog],
    start_broker: Callable[..., BrokerProcess],
    spark: SparkSession,
) -> None:
    catalog.create_topic(
        "orders",
        2,
        {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(DAY),
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    broker = start_broker(root)
    acks: list[Ack] = []
    errors: list[str] = []
    lock = threading.Lock()
    producing = threading.Event()  # producers run until maintenance did ROUNDS rounds
    producing.set()

    def produce(tid: int) -> None:
        with httpx.Client(base_url=broker.url, timeout=60) as http:
            for n in range(MAX_REQUESTS):
                if not producing.is_set():
                    break
                old = n < OLD_REQUESTS
                pairs = [(f"k{(tid * 7 + n + j) % KEYS:02d}", f"{tid}-{n}-{j}") for j in range(5)]
                stamp = {"timestamp_ms": T0 + n} if old else {}
                records = [{"key": k, "value": v, **stamp} for k, v in pairs]
                sent = http.post(
                    "/v1/topics/orders/records", params={"acks": "all"}, json={"records": records}
                )
                if sent.status_code != 200:
                    with lock:
                        errors.append(f"produce {sent.status_code}: {sent.text}")
                    continue
                with lock:
                    acks.extend(
                        Ack(r["partition"], r["offset"], k.encode(), v.encode(), old)
                        for r, (k, v) in zip(sent.json()["records"], pairs, strict=True)
                    )
                time.sleep(0.03)

    def fetch() -> None:
        """A consumer reading from the log start all along: it must never hit a missing file."""
        with httpx.Client(base_url=broker.url, timeout=60) as http:
            while producing.is_set():
                for p in (0, 1):
                    got = http.get(
                        f"/v1/topics/orders/partitions/{p}/records",
                        params={"offset": "earliest", "max_records": 10_000},
                    )
                    if got.status_code not in (200, 416):  # 416: retention moved the start
                        with lock:
                            errors.append(f"fetch {got.status_code}: {got.text}")
                time.sleep(0.02)

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(PRODUCERS)]
    reader = threading.Thread(target=fetch)
    for t in [*threads, reader]:
        t.start()
    removed = during = 0
    deadline = time.monotonic() + 120
    try:
        # Until retention removed something and ROUNDS compactions committed mid-stream.
        while (during < ROUNDS or not removed) and time.monotonic() < deadline:
            removed += apply_retention(catalog, "orders").segments_removed
            report = compact_topic(catalog, "orders", spark, force=True)
            assert report.status in ("ok", "skipped"), report.message
            during += report.status == "ok" and all(t.is_alive() for t in threads)
            time.sleep(0.2)
    finally:
        producing.clear()
        for t in [*threads, reader]:
            t.join(timeout=120)
    removed += apply_retention(catalog, "orders").segments_removed
    compact_topic(catalog, "orders", spark, force=True)
    assert errors == []
    assert removed > 0
    assert during >= ROUNDS, "compactions must commit while the producers are running"

    log = make_catalog().topic("orders")  # a fresh client: only what is durable counts
    stored = read_all(log)
    by_offset = {(p, o): (k, v) for p, o, k, v, _ in stored}
    assert len(by_offset) == len(stored), "an offset appears twice"
    for p in (0, 1):
        offsets = [o for q, o, *_ in stored if q == p]
        assert offsets == sorted(set(offsets))
        mine = sorted(a.offset for a in acks if a.partition == p)
        assert mine == list(range(log.high_watermark(p)))  # dense, each acked once
    latest: dict[tuple[int, bytes | None], int] = {}
    for p, o, k, _, _ in stored:
        latest[(p, k)] = max(o, latest.get((p, k), -1))
    start = {p: log.log_start_offset(p) for p in (0, 1)}
    assert any(start.values())
    for ack in acks:
        if (ack.partition, ack.offset) in by_offset:  # present at its offset, unchanged
            assert by_offset[(ack.partition, ack.offset)] == (ack.key, ack.value)
        elif ack.offset < start[ack.partition]:
            # Below the log start: expired (only old records may be), or superseded by a
            # later record of its key, compacted away, and then its range expired.
            assert ack.old or latest.get((ack.partition, ack.key), -1) > ack.offset, ack
        else:  # superseded by a later record with the same key
            assert latest.get((ack.partition, ack.key), -1) > ack.offset, ack
    # Every key keeps its latest acknowledged record (unless it expired).
    newest: dict[tuple[int, bytes], Ack] = {}
    for ack in acks:
        if ack.offset > newest.get((ack.partition, ack.key), ack).offset or (
            (ack.partition, ack.key) not in newest
        ):
            newest[(ack.partition, ack.key)] = ack
    for ack in newest.values():
        assert (ack.partition, ack.offset) in by_offset or ack.offset < start[ack.partition]
