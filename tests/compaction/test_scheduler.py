"""The scheduler: pure scheduling, typed settings, failures retried, --once, SIGTERM."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import compaction.runner
from compaction.report import read_history
from compaction.retention import apply_retention
from compaction.scheduler import Schedule, Scheduler, SchedulerSettings, load_settings
from lakelog import Catalog, Record
from lakelog.errors import InvalidConfigError, KafkaStorageError
from tests.compaction.helpers import T0, VENV_BIN, read_all, subprocess_env
from tests.fixtures import PROJECT

INTERVALS = {"retention": 300, "compact": 60, "merge": 600, "vacuum": 3600}


def test_schedule_decides_what_is_due() -> None:
    schedule = Schedule.starting_at(INTERVALS, now_ms=1000)
    assert schedule.due(1000) == ["retention", "compact", "merge", "vacuum"]  # all, in order
    for job in schedule.due(1000):
        schedule.done(job, started_ms=1000, finished_ms=1010)
    assert schedule.due(1059) == []
    assert schedule.sleep_ms(1010) == 50
    assert schedule.due(1060) == ["compact"]
    schedule.done("compact", 1060, 1070)
    assert schedule.due(1300) == ["retention", "compact"]
    # A run that overran its interval is due again right after it ended, once:
    # missed runs are not piled up.
    schedule.done("retention", 1300, 2000)
    assert schedule.next_due_ms["retention"] == 2000
    schedule.done("compact", 1300, 1305)
    assert schedule.next_due_ms["compact"] == 1360  # fixed rate from the start
    assert schedule.sleep_ms(5000) == 0


def test_settings_are_typed_and_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = SchedulerSettings()
    assert defaults.intervals() == {
        "retention": 300_000,  # Kafka's log.retention.check.interval.ms
        "compact": 60_000,
        "merge": 600_000,
        "vacuum": 3_600_000,
    }
    assert defaults.log_vacuum_grace_ms == 7 * 24 * 3600 * 1000
    props = tmp_path / "scheduler.properties"
    props.write_text(
        "# Kafka style\nroot=/data/lakelog\nlog.compaction.interval.ms=1000\n"
        "log.merge.interval.ms=2000\n"
    )
    monkeypatch.setenv("LAKELOG_LOG_MERGE_INTERVAL_MS", "3000")  # env beats the file
    settings = load_settings(str(props), log_level="DEBUG")
    assert settings.root == "/data/lakelog" and settings.log_level == "debug"
    assert settings.log_compaction_interval_ms == 1000 and settings.log_merge_interval_ms == 3000
    assert load_settings(str(props), root="/elsewhere").root == "/elsewhere"  # flags beat both
    as_json = tmp_path / "scheduler.json"
    as_json.write_text(json.dumps({"log.vacuum.grace.ms": 0}))
    assert load_settings(str(as_json)).log_vacuum_grace_ms == 0
    for bad, named in [
        ("log.compaction.interval.ms=0", "log.compaction.interval.ms"),
        ("log.vacuum.grace.ms=-5", "log.vacuum.grace.ms"),
        ("log.vacuum.interval.ms=soon", "log.vacuum.interval.ms"),
        ("log.cleaner.threads=4", "log.cleaner.threads"),  # unknown: refused, not ignored
        ("log_level=loud", "log.level"),
    ]:
        props.write_text(bad + "\n")
        with pytest.raises(InvalidConfigError, match=named.replace(".", r"\.")):
            load_settings(str(props))


def test_a_failing_job_is_logged_and_retried_next_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = str(tmp_path / "root")
    catalog = Catalog(root)
    catalog.create_topic("events", 1, {"retention.ms": "1000"})
    catalog.topic("events").append([Record(b"old", timestamp_ms=T0)])
    real = apply_retention
    calls: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KafkaStorageError("the object store is down")
        return real(*args, **kwargs)

    monkeypatch.setattr(compaction.runner, "apply_retention", flaky)
    clock = [0]
    settings = SchedulerSettings(root=root, log_retention_check_interval_ms=300)
    scheduler = Scheduler(settings, catalog=catalog, clock=lambda: clock[0])
    with caplog.at_level(logging.INFO, logger="compaction"):
        outcomes = scheduler.tick(0)  # no job needs Spark here: none is started
    failed = [o for o in outcomes if o.failed]
    assert [(o.report.job, o.report.topic) for o in failed] == [("retention", "events")]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None  # logged with its traceback
    assert "KAFKA_STORAGE_ERROR" in caplog.text and "retrying in 0.3s" in caplog.text
    assert scheduler.tick(299) == []  # not before its interval ...
    clock[0] = 300
    retried = scheduler.tick(300)  # ... then again, and this time it works
    assert [(o.report.job, o.report.status) for o in retried] == [("retention", "ok")]
    assert catalog.topic("events").log_start_offset(0) == 1
    history = sorted(read_history(catalog.storage).to_pylist(), key=lambda h: h["started_ms"])
    assert [(h["job"], h["status"]) for h in history if h["job"] == "retention"] == [
        ("retention", "failed"),
        ("retention", "ok"),
    ]
    scheduler.close()


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_once_runs_every_job_with_one_spark_session(catalog: Catalog, spark: SparkSession) -> None:
    catalog.create_topic("users", 1, {"cleanup.policy": "compact"})
    catalog.create_topic("clicks", 1)  # small segments for merging (compaction leaves one)
    for i in range(4):
        catalog.topic("users").append([Record(f"v{i}".encode(), key=f"u{i % 2}".encode())])
        catalog.topic("clicks").append([Record(f"c{i}".encode())])
    settings = SchedulerSettings(root=catalog.url, log_vacuum_grace_ms=0)
    scheduler = Scheduler(settings, catalog=catalog, spark=spark)
    assert scheduler.run(once=True) == 0
    history = {(h["job"], h["status"]) for h in read_history(catalog.storage).to_pylist()}
    assert history == {("compact", "ok"), ("merge", "ok"), ("vacuum", "ok")}
    assert [v for _, _, _, v, _ in read_all(catalog.topic("users"))] == [b"v1", b"v2", b"v3"]
    assert spark.range(1).count() == 1  # the shared session was not stopped


@pytest.mark.slow
def test_sigterm_stops_the_scheduler_cleanly(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    catalog = Catalog(root)
    catalog.create_topic("events", 1, {"retention.ms": "1000"})
    catalog.topic("events").append([Record(b"old", timestamp_ms=T0)])
    env = subprocess_env()
    env["LAKELOG_LOG_RETENTION_CHECK_INTERVAL_MS"] = "200"
    log_path = tmp_path / "scheduler.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [str(VENV_BIN / "lakelog"), "scheduler", "--root", root],
            cwd=PROJECT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while (
            catalog.topic("events").log_start_offset(0) == 0
            or not read_history(catalog.storage).num_rows
        ):
            assert proc.poll() is None, log_path.read_text()
            if time.monotonic() >= deadline:  # a hang guard, not a speed check
                pytest.fail(log_path.read_text())
            time.sleep(0.1)
            catalog.topic("events").refresh()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = log_path.read_text()
    assert "scheduler started" in log and "SIGTERM received" in log
    assert "scheduler stopped" in log and "Traceback" not in log
