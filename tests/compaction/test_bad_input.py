"""Corrupt and missing segments: a clear CORRUPT_MESSAGE naming the segment, table untouched."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from compaction.compact import compact_topic
from compaction.report import read_history
from compaction.task_errors import task_error
from lakelog import Catalog, Record
from lakelog.cli import main as lakelog_main
from lakelog.errors import CorruptRecordError, KafkaStorageError
from lakelog.storage import join
from tests.compaction.helpers import data_files, snapshot
from tests.fixtures.roots import RootSpec


def _topic(catalog: Catalog, name: str, config: dict[str, str]) -> list[str]:
    catalog.create_topic(name, 1, config)
    log = catalog.topic(name)
    for i in range(4):
        log.append([Record(f"v{i}".encode(), key=f"k{i % 2}".encode()) for _ in range(3)])
    return [s.path for s in log.segments(0)]


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_corrupt_and_missing_segments(
    root: RootSpec, catalog: Catalog, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    # A live segment overwritten with garbage: compaction refuses, naming it.
    paths = _topic(catalog, "garbled", {"cleanup.policy": "compact"})
    table = catalog.topic("garbled").table_path
    catalog.storage.put(join(table, paths[1]), b"this is not parquet")
    before, files = snapshot(catalog, "garbled"), data_files(catalog, "garbled")
    with pytest.raises(
        CorruptRecordError, match=r"segment .*is (unreadable|not a readable Parquet file)"
    ) as caught:
        compact_topic(catalog, "garbled", spark, force=True)
    assert paths[1] in str(caught.value)
    assert snapshot(catalog, "garbled") == before  # same Delta version, same live files
    assert data_files(catalog, "garbled") == files  # and nothing new written

    # A live segment deleted from storage: merging fails through the CLI, exit code 1,
    # the message on stderr, a "failed" row in the jobs history, the table unchanged.
    paths = _topic(catalog, "holey", {})
    catalog.storage.delete(join(catalog.topic("holey").table_path, paths[2]))
    before = snapshot(catalog, "holey")
    code = lakelog_main(["merge", "--root", root.url, "--topic", "holey", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "[CORRUPT_MESSAGE]" in err and paths[2] in err and "missing from storage" in err
    assert snapshot(catalog, "holey") == before
    history = read_history(catalog.storage).to_pylist()
    assert [(h["job"], h["topic"], h["status"]) for h in history] == [("merge", "holey", "failed")]
    assert paths[2] in history[0]["message"]
    # Records before the hole are still served as before.
    log = catalog.topic("holey")
    assert log.read(0, 0, max_records=6).records.num_rows == 6


def test_task_errors_come_back_as_lakelog_errors() -> None:
    text = (
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 1\nFileNotFoundError: nope\n\nThe above exception was the direct '
        "cause of the following exception:\n\nlakelog.errors.KafkaStorageError: "
        "[KAFKA_STORAGE_ERROR] cannot read segment partition=0/a.parquet\n"
    )
    error = task_error(RuntimeError(text))
    assert isinstance(error, KafkaStorageError)
    assert str(error) == "[KAFKA_STORAGE_ERROR] cannot read segment partition=0/a.parquet"
    assert task_error(RuntimeError("java.lang.OutOfMemoryError")) is None
