"""Records of ``__consumer_offsets`` that are not committed offsets, over a real broker.

A root can hold such records: written by a broker of a release that let
clients append to the internal topic, or by a foreign tool. Here they are
forged through the table's internal writer (the public paths refuse them).
Every reader skips them with a warning naming topic, partition and offset,
so listing, describing and the CLI keep working for every group, also after
a restart; ``lakelog doctor`` reports each one and ``--repair`` rewrites its
segment without it, keeping every other record at its offset.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from lakelog.catalog import Catalog
from lakelog.cli import main
from lakelog.groups.codec import OFFSETS_TOPIC, OffsetKey, encode_key, offsets_partition
from lakelog.internal_topics import issue_writer
from lakelog.records import Record
from lakelog.topic_log import AppendResult
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

#: The offsets table's default partition count (``offsets_topic_num_partitions``).
OFFSETS_PARTITIONS = 50


def forge(root: RootSpec, records: list[Record]) -> list[int]:
    """Append records to the offsets table the way only its owner can; their offsets."""
    catalog = Catalog(root.url, s3=root.s3)
    try:
        table = catalog.topic(OFFSETS_TOPIC)
        batch = table.prepare(records, writer=issue_writer(OFFSETS_TOPIC))
        [result] = table.append_prepared([batch])
        assert isinstance(result, AppendResult), result
        return result.offsets
    finally:
        catalog.close()


def partition_rows(root: RootSpec, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
    catalog = Catalog(root.url, s3=root.s3)
    try:
        table = catalog.topic(OFFSETS_TOPIC)
        rows = table.read(partition, 0, 100_000, 1 << 30).records
        return list(
            zip(
                rows.column("offset").to_pylist(),
                rows.column("key").to_pylist(),
                rows.column("value").to_pylist(),
                strict=True,
            )
        )
    finally:
        catalog.close()


def commit(http: httpx.Client, group: str, partition: int, offset: int) -> None:
    body = {"offsets": [{"topic": "orders", "partition": partition, "offset": offset}]}
    response = http.post(f"/v1/groups/{group}/offsets", json=body)
    assert response.status_code == 200, response.text


def check_groups_answer(broker: BrokerProcess) -> None:
    """Every group API and the CLI answer for both groups despite the bad records."""
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        listed = http.get("/v1/groups")
        assert listed.status_code == 200, listed.text
        assert {g["group_id"] for g in listed.json()["groups"]} == {"g1", "g2"}
        described = http.get("/v1/groups/g1")
        assert described.status_code == 200, described.text
        assert [(o["partition"], o["offset"]) for o in described.json()["offsets"]] == [(0, 7)]
        fetched = http.get("/v1/groups/g2/offsets")
        assert fetched.status_code == 200, fetched.text
        assert [o["offset"] for o in fetched.json()["offsets"]] == [5]
    command = [sys.executable, "-m", "lakelog.cli", "consumer-groups"]
    for args in (["--list"], ["--describe", "--group", "g1"]):
        done = subprocess.run(
            [*command, "--bootstrap-server", broker.url, *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "g1" in done.stdout, done.stdout
        if args == ["--list"]:
            assert done.stdout.split() == ["g1", "g2"]


def doctor(root: RootSpec, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["doctor", "--root", root.url, "--json", *args])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == (1 if report["remaining"] else 0)
    return report


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_undecodable_offsets_records_are_skipped_reported_and_repaired(
    root: RootSpec,
    start_broker: Callable[..., BrokerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        created = http.post("/v1/topics", json={"name": "orders", "partitions": 2})
        assert created.status_code == 201, created.text
        commit(http, "g1", 0, 3)
        commit(http, "g2", 1, 5)
        partition = offsets_partition("g1", OFFSETS_PARTITIONS)
        bad = forge(
            root,
            [
                Record(b"x", key=b"g1", partition=partition),  # not an offsets-table key
                Record(None, key=b"g1", partition=partition),  # a tombstone of that key
                Record(  # a key of the table with a value that is not a committed offset
                    b"not json", key=encode_key(OffsetKey("g1", "orders", 0)), partition=partition
                ),
            ],
        )
        commit(http, "g1", 0, 7)  # folding goes on after the bad records
    check_groups_answer(broker)
    for offset in bad:
        warning = f"skipping record of topic {OFFSETS_TOPIC} partition {partition} offset {offset}"
        assert warning in broker.log(), broker.log()
    assert "Traceback" not in broker.log(), broker.log()

    broker.stop()  # a new broker folds the table from the start: same answers
    broker = start_broker(root)
    check_groups_answer(broker)

    report = doctor(root, capsys)
    found = [f for f in report["findings"] if f["check"] == "offsets-table"]
    assert report["findings"] == found, report
    assert sorted(f["offset"] for f in found) == bad
    for finding in found:
        assert finding["topic"] == OFFSETS_TOPIC and finding["partition"] == partition
        assert finding["severity"] == "error" and finding["repairable"]
        assert f"partition {partition} offset {finding['offset']}" in finding["message"]

    before = partition_rows(root, partition)
    report = doctor(root, capsys, "--repair")
    assert (len(report["repaired"]), report["remaining"]) == (3, 0), report
    after = partition_rows(root, partition)
    assert after == [row for row in before if row[0] not in bad]
    assert doctor(root, capsys)["findings"] == []
    check_groups_answer(broker)
