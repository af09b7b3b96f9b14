"""``pip install lakelog`` without extras: the library and the client work, the rest says why not.

A real install (wheel built by pip from a copy of the sources, dependencies from
the configured indexes and the pip cache) into a fresh virtualenv, then a
program run there, outside the checkout, that produces to and consumes from a
broker (started from the test venv, which has the broker extra).
"""

from __future__ import annotations

import shutil
import subprocess
import venv
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.brokers import PROJECT, BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration  # a fresh virtual environment and pip

PACKAGES = ("lakelog", "server", "compaction", "spark_connector")

PROGRAM = """
import sys
from importlib.util import find_spec

import lakelog
from lakelog.client import AdminClient, Consumer, Producer, TopicPartition

assert lakelog.__file__.startswith(sys.prefix), lakelog.__file__  # the installed copy
absent = [m for m in ("fastapi", "uvicorn", "pyspark", "deltalake", "pandas") if find_spec(m)]
assert absent == [], absent

url = sys.argv[1]
with AdminClient(url) as admin:
    admin.create_topic("core-only", partitions=2)
with Producer(url) as producer:
    futures = [producer.send("core-only", f"v{i}".encode(), key=f"k{i}".encode()) for i in range(6)]
    producer.flush()
written = sorted((f.result().partition, f.result().offset) for f in futures)
partitions = [TopicPartition("core-only", p) for p in range(2)]
read = []
with Consumer(url, auto_offset_reset="earliest") as consumer:
    consumer.assign(partitions)
    end = consumer.end_offsets(partitions)
    while any(consumer.position(tp) < end[tp] for tp in partitions):
        for records in consumer.poll(timeout_ms=2_000).values():
            read += [(r.partition, r.offset) for r in records]
assert sorted(read) == written, (read, written)
print("produced and consumed", len(read))

for part in ("server", "compaction", "spark_connector"):
    try:
        __import__(part)
    except ImportError as exc:
        print(f"{part}: {exc}")
    else:
        raise SystemExit(f"{part} imported without its extra")
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_core_install_has_the_client_and_names_the_extras(
    tmp_path: Path, start_broker: Callable[..., BrokerProcess]
) -> None:
    source = tmp_path / "source"
    for package in PACKAGES:
        shutil.copytree(
            PROJECT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT / name, source / name)
    env_dir = tmp_path / "core-venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    installed = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", str(source)],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert "project.license" not in installed.stdout + installed.stderr

    broker = start_broker(RootSpec(str(tmp_path / "root")))
    work = tmp_path / "elsewhere"  # not the checkout: only the installed copy is importable
    work.mkdir()
    done = subprocess.run(
        [str(bin_dir / "python"), "-c", PROGRAM, broker.url],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "produced and consumed 6"
    assert lines[1].startswith("server: the lakelog broker (server/) needs fastapi")
    assert lines[1].endswith("pip install 'lakelog[broker]'")
    assert lines[2].startswith("compaction: compaction/ (the maintenance jobs) needs pyspark")
    assert lines[3].startswith("spark_connector: spark_connector/ (the Spark data source) needs")
    assert all(line.endswith("pip install 'lakelog[spark]'") for line in lines[2:4])

    # The CLI's tools work; a command whose extra is missing says which one, no traceback.
    topics = subprocess.run(
        [str(bin_dir / "lakelog"), "topics", "--bootstrap-server", broker.url, "--list"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert topics.returncode == 0 and "core-only" in topics.stdout, topics.stderr
    for command, extra in [(["broker", "start"], "broker"), (["maintain"], "spark")]:
        refused = subprocess.run(
            [str(bin_dir / "lakelog"), *command],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert refused.returncode == 1, refused.stderr
        assert "Traceback" not in refused.stderr
        assert f"pip install 'lakelog[{extra}]'" in refused.stderr
