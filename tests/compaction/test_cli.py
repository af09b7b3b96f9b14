"""The maintenance commands: errors in-process; `lakelog maintain` and spark-submit as processes."""

from __future__ import annotations

import importlib.util
import py_compile
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from compaction.job import build_parser as job_parser
from compaction.report import read_history
from lakelog import Catalog, Record
from lakelog.cli import build_parser as lakelog_parser
from lakelog.cli import main as lakelog_main
from tests.compaction.helpers import T0, VENV_BIN, read_all, run, subprocess_env
from tests.fixtures import PROJECT
from tests.fixtures.roots import RootSpec

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _small_root(root: str) -> Catalog:
    """A compacted topic with superseded keys and small segments, and an expired plain topic."""
    catalog = Catalog(root)
    catalog.create_topic("users", 1, {"cleanup.policy": "compact"})
    catalog.create_topic("clicks", 1, {"retention.ms": "3600000"})
    for i in range(5):
        catalog.topic("users").append([Record(f"v{i}".encode(), key=f"u{i % 2}".encode())])
        catalog.topic("clicks").append([Record(b"c", timestamp_ms=T0 + i)])
    return catalog


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_command_errors_are_clear(
    root: RootSpec, catalog: Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog.create_topic("plain", 1)
    catalog.topic("plain").append([Record(b"x")])

    def lakelog(*args: str) -> tuple[int, str]:
        code = lakelog_main([*args, "--root", root.url, "--no-progress"])
        return code, capsys.readouterr().err

    code, err = lakelog("compact", "--topic", "nope")
    assert code == 1 and "[UNKNOWN_TOPIC_OR_PARTITION] topic 'nope' does not exist" in err
    code, err = lakelog("compact", "--topic", "plain")
    assert code == 1 and "[INVALID_CONFIG]" in err and "cleanup.policy=delete" in err
    code, err = lakelog("vacuum", "--grace-ms", "-1")
    assert code == 1 and "grace period must be >= 0" in err
    # Without --topic, compaction skips plain topics (and needs no Spark for that).
    assert lakelog_main(["compact", "--root", root.url, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"compact\s+plain\s+skipped: not a compacted topic", out)
    assert read_history(catalog.storage).num_rows == 0  # skips are not recorded


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_maintain_then_forced_compaction_leaves_each_key_once(
    root: RootSpec, catalog: Catalog, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    """produce, `lakelog maintain`, `lakelog compact --force`: every key once, its latest value.

    Appends of 50 records over 40 keys, the last one included, written ten
    minutes ago on a topic with segment.ms of one minute: every segment is
    rolled, so merging must leave nothing that cleaning cannot reach.
    """
    catalog.create_topic("orders", 2, {"cleanup.policy": "compact", "segment.ms": "60000"})
    log = catalog.topic("orders")
    written = int(time.time() * 1000) - 10 * 60_000
    latest: dict[bytes, bytes] = {}
    for batch in range(12):
        records = []
        for i in range(50):
            key, value = f"k{(batch * 7 + i) % 40}".encode(), f"v{batch}-{i}".encode()
            records.append(Record(value, key=key, timestamp_ms=written + batch))
            latest[key] = value
        log.append(records)

    def lakelog(*args: str) -> str:
        assert lakelog_main([*args, "--root", root.url, "--no-progress"]) == 0
        return capsys.readouterr().out

    maintained = lakelog("maintain")
    assert re.search(r"^compact\s+orders\s+partitions=2", maintained, re.M), maintained
    forced = lakelog("compact", "--topic", "orders", "--force")
    assert re.search(r"^compact\s+orders\s+partitions=2", forced, re.M), forced
    rows = [(key, value) for _, _, key, value, _ in read_all(log)]
    assert sorted(key for key, _ in rows if key is not None) == sorted(latest)
    assert dict(rows) == latest


@pytest.mark.slow
def test_maintain_in_a_subprocess_reports_and_records(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    catalog = _small_root(root)
    env = subprocess_env()
    env["LAKELOG_SPARK_DRIVER_JAVA_OPTIONS"] = FAST_JVM
    done = run([str(VENV_BIN / "lakelog"), "maintain", "--root", root, "--force"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for job, topic, status in [
        ("retention", "clicks", r"partitions=1 records 5 -> 0"),
        ("compact", "clicks", r"skipped: not a compacted topic"),
        ("compact", "users", r"partitions=1 records 4 -> 2 tombstones_dropped=0"),
        # Compaction left one cleaned segment and the active one, which merging leaves alone.
        ("merge", "users", r"skipped: no run of small segments to merge"),
        ("vacuum", "users", r"deleted 0 removed"),
    ]:
        assert any(re.match(rf"{job}\s+{topic}\s+.*{status}", line) for line in lines), (
            job,
            topic,
            done.stdout,
        )
    assert re.search(r"2 topic\(s\), \d+ ok, \d+ skipped, 0 failed", done.stdout)
    assert "compact users" in done.stderr  # the progress bar
    history = read_history(catalog.storage).to_pylist()
    recorded = {(h["job"], h["topic"], h["status"]) for h in history}
    assert {
        ("retention", "clicks", "ok"),
        ("compact", "users", "ok"),
    } <= (recorded)
    assert all(h["status"] != "skipped" for h in history)
    # u0's latest record is in the active segment (written just now), which compaction
    # never reads, so the cleaned tail keeps its own latest u0 too.
    assert [(k, v) for _, _, k, v, _ in read_all(catalog.topic("users"))] == [
        (b"u0", b"v2"),
        (b"u1", b"v3"),
        (b"u0", b"v4"),
    ]


@pytest.mark.slow
def test_spark_submit_runs_the_job(tmp_path: Path) -> None:
    root = str(tmp_path / "root")
    catalog = _small_root(root)
    env = subprocess_env()
    done = run(
        [
            str(VENV_BIN / "spark-submit"),
            "--master",
            "local[1]",
            "--driver-java-options",
            FAST_JVM,
            "--conf",
            "spark.ui.enabled=false",
            "compaction/job.py",
            "--root",
            root,
            "compact",
            "--topic",
            "users",
            "--no-progress",
        ],
        env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^compact\s+users\s+partitions=1 records 4 -> 2", done.stdout, re.M)
    assert [v for _, _, _, v, _ in read_all(catalog.topic("users"))] == [b"v2", b"v3", b"v4"]
    assert [h["job"] for h in read_history(catalog.storage).to_pylist()] == ["compact"]


# -- infra recipes ----------------------------------------------------------------------------


def test_crontab_commands_parse_with_the_real_cli() -> None:
    text = (PROJECT / "infra/cron/lakelog.crontab").read_text()
    jobs = [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith("#") and not re.match(r"^[A-Z_]+=", line)
    ]
    assert len(jobs) == 4
    parser = lakelog_parser()
    seen = set()
    for line in jobs:
        fields = line.split()
        assert len(fields) > 5 and all(re.fullmatch(r"[0-9*/,\-]+", f) for f in fields[:5])
        words = shlex.split(" ".join(fields[5:]))
        cli = words[words.index("lakelog") + 1 : words.index(">>")]
        args = parser.parse_args(cli)
        seen.add(cli[0])
        assert args.no_progress
    assert seen == {"retention", "compact", "merge", "vacuum"}
    assert "%" not in "\n".join(jobs)


@pytest.mark.integration  # runs the submit script
def test_spark_submit_script_builds_the_command() -> None:
    script = PROJECT / "infra/spark-submit/submit.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    env = {
        "PATH": "/usr/bin:/bin",
        "DRY_RUN": "1",
        "LAKELOG_ROOT": "s3://bucket/lakelog",
        "SPARK_MASTER": "yarn",
        "LAKELOG_PYTHON_ENV": "hdfs:///envs/lakelog.tar.gz",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "very-secret",
    }
    done = subprocess.run(
        [str(script), "maintain", "--force"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert words[:3] == ["spark-submit", "--master", "yarn"]
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID=AKIDEXAMPLE" in words
    assert "spark.executorEnv.AWS_SECRET_ACCESS_KEY=***" in words  # masked when printed
    assert "very-secret" not in done.stdout
    assert "spark.pyspark.python=./lakelog_env/bin/python" in words
    job = words.index(str(PROJECT / "compaction/job.py"))
    args = job_parser().parse_args(words[job + 1 :])
    assert args.root == "s3://bucket/lakelog" and args.jobs[0] == "retention" and args.force


def test_airflow_dag() -> None:
    path = PROJECT / "infra/airflow/lakelog_maintenance_dag.py"
    if importlib.util.find_spec("airflow") is None:
        # Airflow is not installed here: the DAG file is at least valid Python.
        py_compile.compile(str(path), doraise=True)
        return
    spec = importlib.util.spec_from_file_location("lakelog_maintenance_dag", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.dag
    assert [t.task_id for t in dag.topological_sort()] == [
        "retention",
        "compact",
        "merge",
        "vacuum",
    ]
