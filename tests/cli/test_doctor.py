"""``lakelog doctor`` on real roots (local directory and moto S3), through the CLI entry point.

A healthy root exits 0. Damage is then made the way faults make it: an orphan
segment and a Spark staging directory left by killed writers, a broker entry
of a broker that died, a table whose topic deletion did not finish, a live
segment overwritten with garbage. The doctor reports each; ``--repair`` with
a zero grace period deletes exactly the safe ones and leaves the corrupt
segment (an operator's job), so the exit code stays 1. A garbage Delta commit
is reported naming the commit, and never repaired.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lakelog.catalog import Catalog
from lakelog.cli import main
from lakelog.records import Record
from tests.fixtures.roots import RootSpec


@pytest.fixture
def doctor(root: RootSpec, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    if root.s3 is not None:
        for name, value in request.getfixturevalue("s3_env").items():
            monkeypatch.setenv(name, value)

    def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
        code = main(["doctor", "--root", root.url, "--json", *args])
        return code, json.loads(capsys.readouterr().out)

    return run


def fill(root: RootSpec) -> Catalog:
    catalog = Catalog(root.url, s3=root.s3)
    catalog.create_topic("t", 2)
    catalog.create_topic("u", 1)
    for _ in range(3):
        catalog.topic("t").append([Record(value=b"v", key=f"k{i}".encode()) for i in range(6)])
    catalog.topic("u").append([Record(value=b"x")])
    return catalog


def checks(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((f["check"], f["path"]) for f in report["findings"])


def test_healthy_then_damaged_then_repaired(
    root: RootSpec, doctor: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = fill(root)
    storage = catalog.storage
    code, report = doctor(capsys)
    assert (code, report["findings"]) == (0, []), report

    table = catalog.topic("t").table_path
    live = sorted(catalog.topic("t").live_paths())
    orphan = f"{table}/partition=0/00000000000000000099-00000000000000000099-dead.parquet"
    storage.put(orphan, b"never committed")
    storage.put("_staging/write-1/part-0.parquet", b"staged")
    storage.put("_meta/brokers/gone.json", json.dumps({"heartbeat_ms": 1}).encode())
    dead_table = "topics/u/0123456789abcdef/_delta_log/00000000000000000000.json"
    storage.put(dead_table, b"{}")
    corrupt = f"{table}/{live[0]}"
    storage.put(corrupt, b"not parquet at all")

    code, report = doctor(capsys, "--grace-seconds", "3600")
    assert code == 1
    found = checks(report)
    assert ("orphans", orphan) in found
    assert ("staging", "_staging/write-1") in found
    assert ("registry", "_meta/brokers/gone.json") in found
    assert ("orphans", "topics/u/0123456789abcdef") in found
    assert ("segment", corrupt) in found
    # Within the grace period only the broker entry may go.
    assert [f["path"] for f in report["findings"] if f["repairable"]] == ["_meta/brokers/gone.json"]
    [bad] = [f for f in report["findings"] if f["check"] == "segment"]
    assert "partition 0" in bad["message"] and "not readable Parquet" in bad["message"]

    code, report = doctor(capsys, "--repair", "--grace-seconds", "0")
    assert code == 1 and report["remaining"] == 1
    assert sorted(f["path"] for f in report["repaired"]) == sorted(
        [orphan, "_staging/write-1", "_meta/brokers/gone.json", "topics/u/0123456789abcdef"]
    )
    for path in (orphan, "_staging/write-1/part-0.parquet", "_meta/brokers/gone.json", dead_table):
        assert not storage.exists(path), path
    assert storage.exists(corrupt), "the doctor must not delete a live segment"

    code, report = doctor(capsys, "--topic", "u")
    assert (code, report["findings"]) == (0, [])
    catalog.close()


def test_corrupt_commit_is_reported_and_left_alone(
    root: RootSpec, doctor: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = fill(root)
    table = catalog.topic("u").table_path
    version = catalog.topic("u").version
    garbage = f"{table}/_delta_log/{version + 1:020d}.json"
    catalog.storage.put(garbage, b'{"add": {"pa')
    missing = f"{table}/_delta_log/{version + 3:020d}.json"
    catalog.storage.put(missing, b'{"commitInfo": {}}')
    code, report = doctor(capsys, "--repair", "--grace-seconds", "0")
    assert code == 1
    messages = [f["message"] for f in report["findings"] if f["topic"] == "u"]
    assert any(f"commit {version + 1}" in m and "not valid JSON" in m for m in messages), messages
    assert any(f"missing after the start: {version + 2}" in m for m in messages), messages
    assert report["repaired"] == []
    assert catalog.storage.read_bytes(garbage) == b'{"add": {"pa'
    # The other topic is checked as usual.
    assert not [f for f in report["findings"] if f["topic"] == "t"]
    catalog.close()


def test_text_output_and_help(
    capsys: pytest.CaptureFixture[str], root: RootSpec, doctor: Any
) -> None:
    fill(root).close()
    assert main(["doctor", "--root", root.url]) == 0
    assert "0 problem(s) found" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    assert "never edits or deletes a Delta" in capsys.readouterr().out
