"""On a Spark standalone cluster (a master and two workers on loopback), results equal local[2]'s.

The cluster is driven from subprocesses (this process's one SparkContext is
the ``local[2]`` session), through the public entry points: compaction's
``run_job`` and ``format("lakelog")``/``register_topics``/AvailableNow in
``tests.cluster.driver``, and ``lakelog maintain --master spark://...``. The
same work on twin roots (filled alike) with the ``local[2]`` session gives
the reference; on both a local root and the S3-protocol server.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakelog import Catalog
from lakelog.cli import main as lakelog_main
from lakelog.storage import S3Settings
from lakelog.testing.brokers import wait_for
from lakelog.testing.env import child_env
from tests.cluster.workload import NOW, fill_root, plain, run_workload
from tests.compaction.helpers import read_all
from tests.fixtures import PROJECT
from tests.fixtures.roots import RootSpec
from tests.fixtures.spark_cluster import FAST_JVM, StandaloneCluster, stop_group
from tests.spark_connector.helpers import log_rows

# A guard against hangs only: a driver and the cluster's JVMs share two cores with
# this process, so a run takes minutes on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

KINDS = ("local", "s3")


@pytest.fixture
def new_root(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], RootSpec]:
    """Factory of fresh roots of a given kind (``local`` directory or ``s3`` bucket)."""
    counter = iter(range(1_000_000))

    def make(kind: str) -> RootSpec:
        n = next(counter)
        if kind == "local":
            return RootSpec(str(tmp_path / f"root{n}"))
        settings: S3Settings = request.getfixturevalue("s3_settings")
        bucket = request.getfixturevalue("make_bucket")()
        return RootSpec(f"s3://{bucket}/lakelog", settings)

    return make


def filled(root: RootSpec) -> RootSpec:
    catalog = Catalog(root.url, s3=root.s3)
    try:
        fill_root(catalog)
    finally:
        catalog.close()
    return root


def stored_log(root: RootSpec, topic: str) -> list[Any]:
    catalog = Catalog(root.url, s3=root.s3)
    try:
        return read_all(catalog.topic(topic))
    finally:
        catalog.close()


def reference_rows(root: RootSpec) -> list[list[Any]]:
    """Every record of both topics as ``TopicLog.read`` returns it, in the workload's format."""
    catalog = Catalog(root.url, s3=root.s3)
    try:
        rows = log_rows(catalog, "users", with_headers=True) + log_rows(
            catalog, "clicks", with_headers=True
        )
    finally:
        catalog.close()
    return sorted(([plain(v) for v in row] for row in rows), key=repr)


class Child:
    """A driver subprocess running while this process computes the local[2] reference."""

    def __init__(self, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.out, self.err = log_dir / "stdout.txt", log_dir / "stderr.txt"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.process = subprocess.Popen(
                args, cwd=PROJECT, env=env, stdout=out, stderr=err, start_new_session=True
            )

    def finish(self, timeout_s: float = 480) -> subprocess.CompletedProcess[str]:
        try:
            self.process.wait(timeout=timeout_s)
        finally:
            stop_group(self.process)  # its JVM too, should it outlive the driver
        return subprocess.CompletedProcess(
            self.process.args,
            self.process.returncode,
            self.out.read_text(errors="replace"),
            self.err.read_text(errors="replace"),
        )


@contextlib.contextmanager
def running(args: list[str], env: dict[str, str], log_dir: Path) -> Iterator[Child]:
    """Start a child for a ``with`` block; it is stopped if the block fails before finishing."""
    log_dir.mkdir(parents=True, exist_ok=True)
    child = Child(args, env, log_dir)
    try:
        yield child
    finally:
        stop_group(child.process)


def ran_on_both_workers(cluster: StandaloneCluster, app_id: str) -> None:
    """The master saw the application and each worker ran one of its executors."""
    apps = {app["id"]: app for app in cluster.applications()}
    assert app_id in apps, (app_id, list(apps))
    workers = {path.parents[2].name for path in cluster.executor_dirs(app_id)}
    assert workers == {"worker-0", "worker-1"}, cluster.executor_dirs(app_id)


def test_jobs_reads_sql_and_stream_on_the_cluster_equal_local(
    spark_cluster: StandaloneCluster,
    spark: SparkSession,
    new_root: Callable[[str], RootSpec],
    s3_settings: S3Settings,
    tmp_path: Path,
) -> None:
    """Retention, compaction, batch reads, SQL and an AvailableNow stream, on both root kinds."""
    on_cluster = {kind: filled(new_root(kind)) for kind in KINDS}
    on_local = {kind: filled(new_root(kind)) for kind in KINDS}
    results_path = tmp_path / "cluster.json"
    env = spark_cluster.driver_env(child_env(PROJECT, s3=s3_settings))
    args = [
        sys.executable,
        "-m",
        "tests.cluster.driver",
        spark_cluster.master_url,
        str(results_path),
        str(tmp_path / "cluster-work"),
        *(on_cluster[kind].url for kind in KINDS),
    ]
    with running(args, env, tmp_path / "driver") as child:
        local_runs = {
            kind: run_workload(spark, root.url, root.s3, tmp_path / f"local-{kind}")
            for kind, root in on_local.items()
        }
        done = child.finish()
    assert done.returncode == 0, done.stderr[-5000:] + spark_cluster.logs()
    cluster_run = json.loads(results_path.read_text())
    assert cluster_run["executors"] == 2
    ran_on_both_workers(spark_cluster, cluster_run["app_id"])

    for kind in KINDS:
        remote = cluster_run["roots"][on_cluster[kind].url]
        local = local_runs[kind]
        assert remote.pop("master") == spark_cluster.master_url
        assert local.pop("master").startswith("local")
        # Round-trip through JSON: the cluster's results were written that way.
        local = json.loads(json.dumps(local))
        for part in local:
            assert remote[part] == local[part], (kind, part)
        # Equal, and right: the batch read is the stored log, which is the same on both.
        assert remote["batch"] == reference_rows(on_cluster[kind])
        assert remote["stream"]["rows"] == remote["batch"]
        # The native scan returns the data source's rows (S3: Spark has no s3a here).
        assert remote["native_scan"] == (kind == "local")
        assert remote["native_batch"] == remote["batch"]
        assert remote["native_selective"] == remote["selective"]
        assert remote["native_sql_per_partition"] == remote["sql_per_partition"]
        assert remote["stream"]["batches"] > 1
        for topic in ("users", "clicks"):
            assert stored_log(on_cluster[kind], topic) == stored_log(on_local[kind], topic)
        compacted = [r for r in remote["reports"] if r["job"] == "compact" and r["status"] == "ok"]
        assert compacted and compacted[0]["tombstones_dropped"] == 1


def report_lines(stdout: str) -> list[str]:
    """The reports and summary of a maintain run, without timings and sizes (not results).

    Other lines (a warning Spark's Python prints to stdout under spark-submit)
    are left out.
    """
    lines = []
    for line in stdout.splitlines():
        if re.match(r"(retention|compact|merge|vacuum)[\s+]", line):
            line = re.sub(r" bytes [\d,]+ -> [\d,]+", "", line)
            lines.append(re.sub(r" in [\d.]+s", "", line))
    return lines


def maintain_command(
    launcher: str, cluster: StandaloneCluster, root: RootSpec, args: list[str], env: dict[str, str]
) -> tuple[list[str], dict[str, str], str]:
    """The command, environment and application name of a maintain run on ``cluster``.

    ``lakelog``: the CLI builds its own session against ``--master``.
    ``submit.sh``: infra/spark-submit's wrapper, settings from the environment
    as its README says, ``spark-submit`` creating the session.
    """
    if launcher == "lakelog":
        lakelog = str(Path(sys.executable).with_name("lakelog"))
        command = [lakelog, *args, "--root", root.url, "--master", cluster.master_url]
        return command, env, "lakelog"
    env = {
        **env,
        "SPARK_MASTER": cluster.master_url,
        "LAKELOG_ROOT": root.url,
        "SPARK_SUBMIT": str(Path(sys.executable).with_name("spark-submit")),
        "EXTRA_SPARK_ARGS": f"--conf spark.driver.extraJavaOptions={FAST_JVM.split()[0]}",
    }
    return ["bash", str(PROJECT / "infra/spark-submit/submit.sh"), *args], env, "lakelog-maintain"


# The workload test covers both root kinds; here each launcher runs on one.
@pytest.mark.parametrize(("launcher", "kind"), [("lakelog", "s3"), ("submit.sh", "local")])
def test_maintain_on_the_cluster_equals_local(
    launcher: str,
    kind: str,
    spark_cluster: StandaloneCluster,
    spark: SparkSession,
    new_root: Callable[[str], RootSpec],
    s3_settings: S3Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """``lakelog maintain --master spark://...`` (or submit.sh) runs on the cluster, as local[2]."""
    on_cluster, on_local = filled(new_root(kind)), filled(new_root(kind))
    args = ["maintain", "--force", "--now-ms", str(NOW), "--no-progress"]
    base_env = spark_cluster.driver_env(
        child_env(PROJECT, s3=s3_settings) if kind == "s3" else None
    )
    command, env, app_name = maintain_command(launcher, spark_cluster, on_cluster, args, base_env)
    before = {app["id"] for app in spark_cluster.applications()}
    with running(command, env, tmp_path / "cli") as child:
        if kind == "s3":
            for name, value in child_env(PROJECT, s3=s3_settings).items():
                if name.startswith("AWS_"):
                    monkeypatch.setenv(name, value)
        capsys.readouterr()
        assert lakelog_main([*args, "--root", on_local.url]) == 0  # joins the local[2] session
        local_out = capsys.readouterr().out
        done = child.finish()
    assert done.returncode == 0, done.stderr[-5000:] + spark_cluster.logs()
    (app,) = [a for a in spark_cluster.applications() if a["id"] not in before]
    assert app["name"] == app_name
    ran_on_both_workers(spark_cluster, app["id"])
    # The master ends an application when its driver disconnects, shortly after the exit.
    wait_for(
        lambda: app["id"] in {a["id"] for a in spark_cluster.state()["completedapps"]},
        f"the master to see application {app['id']} finish",
        60,
    )
    assert re.search(r"^compact\s+users\s+partitions=2", done.stdout, re.M), done.stdout
    assert report_lines(done.stdout) == report_lines(local_out)
    for topic in ("users", "clicks"):
        assert stored_log(on_cluster, topic) == stored_log(on_local, topic)
