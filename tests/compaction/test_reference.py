"""Compaction cross-checked against a plain Spark SQL computation over the raw appends."""

from __future__ import annotations

import random
from collections.abc import Callable

from pyspark.sql import SparkSession

from compaction.compact import compact_topic
from lakelog import Catalog, Record
from tests.compaction.helpers import MINUTE, T0, read_all

PARTITIONS = 3
APPENDS = 10
PER_APPEND = 500
KEYS = 300
DELETE_RETENTION_MS = 15 * MINUTE


def test_compaction_matches_reference_sql(
    make_catalog: Callable[..., Catalog], spark: SparkSession
) -> None:
    rng = random.Random(7)
    catalog = make_catalog()
    catalog.create_topic(
        "ledger",
        PARTITIONS,
        {"cleanup.policy": "compact", "delete.retention.ms": str(DELETE_RETENTION_MS)},
    )
    log = catalog.topic("ledger")
    raw: list[tuple[int, int, bytes, bytes | None, int]] = []
    n = 0
    for _ in range(APPENDS):
        batch = []
        for _ in range(PER_APPEND):
            key = f"key-{rng.randrange(KEYS):03d}".encode()
            value = None if rng.random() < 0.06 else f"value-{n}".encode()
            batch.append(Record(value, key=key, timestamp_ms=T0 + n * 1000))
            n += 1
        result = log.append(batch)
        raw += [
            (p, o, r.key or b"", r.value, r.timestamp_ms or 0)
            for p, o, r in zip(result.partitions, result.offsets, batch, strict=True)
        ]
    assert {p for p, *_ in raw} == set(range(PARTITIONS))
    now = T0 + n * 1000
    cutoff = now - DELETE_RETENTION_MS
    tombstones = [r for r in raw if r[3] is None]
    assert any(t[4] < cutoff for t in tombstones) and any(t[4] >= cutoff for t in tombstones)
    heads = {p: log.segments(p)[-1].base_offset for p in range(PARTITIONS)}

    # The reference: per (partition, key) the record with the highest offset, unless it
    # is a tombstone older than delete.retention.ms; the newest segment of each
    # partition (offsets >= head) is not cleaned, so all of it stays.
    frame = spark.createDataFrame(
        raw, "partition int, offset long, key binary, value binary, ts long"
    )
    frame.createOrReplaceTempView("raw_appends")
    heads_sql = " ".join(f"WHEN {p} THEN {b}" for p, b in heads.items())
    expected_rows = spark.sql(
        f"""
        WITH tail AS (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY partition, key ORDER BY offset DESC) AS rn
            FROM raw_appends WHERE offset < CASE partition {heads_sql} END
        )
        SELECT partition, offset, key, value FROM tail
        WHERE rn = 1 AND NOT (value IS NULL AND ts < {cutoff})
        UNION ALL
        SELECT partition, offset, key, value FROM raw_appends
        WHERE offset >= CASE partition {heads_sql} END
        """
    ).collect()
    dropped = spark.sql(
        f"""
        SELECT COUNT(*) AS n FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY partition, key ORDER BY offset DESC) AS rn
            FROM raw_appends WHERE offset < CASE partition {heads_sql} END
        ) WHERE rn = 1 AND value IS NULL AND ts < {cutoff}
        """
    ).collect()[0]["n"]
    expected = sorted(
        (
            r["partition"],
            r["offset"],
            bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
        )
        for r in expected_rows
    )

    report = compact_topic(catalog, "ledger", spark, now_ms=now, force=True)
    assert report.status == "ok", report.message
    got = [(p, o, k, v) for p, o, k, v, _ in read_all(log)]
    assert got == expected
    # Offsets never changed: every survivor is exactly what was appended at its offset.
    appended = {(p, o): (k, v) for p, o, k, v, _ in raw}
    assert all(appended[(p, o)] == (k, v) for p, o, k, v in got)
    assert report.records_in == sum(1 for p, o, *_ in raw if o < heads[p])
    assert report.records_out == len(got) - sum(1 for p, o, *_ in raw if o >= heads[p])
    assert report.tombstones_dropped == dropped > 0
    assert any(v is None and o < heads[p] for p, o, _, v in got)  # young tombstones stay
    for p in range(PARTITIONS):
        assert log.log_start_offset(p) == 0
        assert log.high_watermark(p) == sum(1 for r in raw if r[0] == p)
