"""Every way of getting a session that spark_connector/README.md documents works as written.

Each snippet of the README's "Getting a session" runs in its own process with
a real local Spark, from the venv's Python *not activated*: ``PATH`` holds no
venv directory, and its ``python3`` is a bare virtualenv without lakelog, as
on a fresh machine where ``python3`` is the system's. The Python snippets run
outside the checkout, so Spark's workers could not find lakelog through their
working directory either. A worker started with a Python that lacks lakelog's
modules must fail with lakelog's message naming PYSPARK_PYTHON.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import lakelog
from lakelog import Record
from tests.fixtures.brokers import PROJECT

README = PROJECT / "spark_connector" / "README.md"
VENV_BIN = Path(sys.executable).parent
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def documented(language: str) -> list[str]:
    """The ``language`` code blocks of the README's "Getting a session" section."""
    text = README.read_text()
    section = text[text.index("## Getting a session") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


@pytest.fixture(scope="module")
def bare_python3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose ``python3`` is a Python 3.11 with nothing installed."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    venv.create(where, with_pip=False)
    return where / "bin"


@pytest.fixture(scope="module")
def orders_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("root") / "lakelog"
    catalog = lakelog.connect(str(path))
    catalog.create_topic("orders", partitions=2)
    catalog.topic("orders").append(
        [Record(f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 2) for i in range(7)]
    )
    catalog.close()
    return path


def user_env(bare_bin: Path, root: Path) -> dict[str, str]:
    """The environment of a user running ``.venv/bin/python`` without activating the venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"}
        and not k.startswith("PYTEST")
        and k != "PYTHONPATH"
    }
    entries = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    env["PATH"] = os.pathsep.join([str(bare_bin), *entries])
    env["LAKELOG_ROOT"] = str(root)
    # Short runs: start the JVMs in a third of the time (no effect on which Python runs).
    env["JAVA_TOOL_OPTIONS"] = FAST_JVM
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=840, check=False
    )


def counts(stdout: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> records, from ``show()``'s table of the first snippet."""
    rows = re.findall(r"^\|\s*(\S+)\|\s*(\d+)\|\s*(\d+)\|$", stdout, re.MULTILINE)
    return {(t, int(p)): int(n) for t, p, n in rows}


def test_the_readme_documents_three_ways() -> None:
    assert len(documented("python")) == 2 and len(documented("bash")) == 1


def test_builder_session_then_register_topics(
    bare_python3: Path, orders_root: Path, tmp_path: Path
) -> None:
    """``SparkSession.builder.getOrCreate()`` knows nothing of lakelog; registering fixes it."""
    script = tmp_path / "my_job.py"
    script.write_text(documented("python")[0])
    env = user_env(bare_python3, orders_root)
    done = run([sys.executable, str(script)], env, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert counts(done.stdout) == {("orders", 0): 4, ("orders", 1): 3}


def test_compaction_spark_session(bare_python3: Path, orders_root: Path, tmp_path: Path) -> None:
    script = tmp_path / "my_job.py"
    script.write_text(documented("python")[1])
    done = run([sys.executable, str(script)], user_env(bare_python3, orders_root), tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(re.findall(r"^\|\[6B \d+\]\|", done.stdout, re.MULTILINE)) == 7  # show()'s rows


def test_spark_submit(bare_python3: Path, orders_root: Path, tmp_path: Path) -> None:
    """The documented command line, run from the checkout, with this venv as ``.venv``."""
    script = tmp_path / "my_job.py"
    script.write_text(documented("python")[0])
    (line,) = [x for x in documented("bash")[0].splitlines() if x.strip()]
    line = line.replace(".venv/bin/", f"{VENV_BIN}/").replace("my_job.py", str(script))
    done = run(["bash", "-c", line], user_env(bare_python3, orders_root), PROJECT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert counts(done.stdout) == {("orders", 0): 4, ("orders", 1): 3}


def test_a_worker_without_lakelog_says_what_to_set(bare_python3: Path, orders_root: Path) -> None:
    """Workers told to run a bare Python: they find lakelog's source (the working
    directory is the checkout) but not pyarrow, and say which setting is wrong."""
    env = user_env(bare_python3, orders_root)
    env["PYSPARK_PYTHON"] = str(bare_python3 / "python3")
    done = run([sys.executable, "-c", documented("python")[0]], env, PROJECT)
    assert done.returncode != 0
    assert "lakelog.errors.MissingDependencyError: lakelog needs the module 'pyarrow'" in (
        done.stderr
    )
    assert "This is one of Spark's Python workers" in done.stderr
    assert "PYSPARK_PYTHON" in done.stderr
