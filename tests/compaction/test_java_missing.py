"""Without a Java runtime, lakelog's Spark entry points say so in one line naming Java 17.

PySpark's launcher runs ``$JAVA_HOME/bin/java``, or ``java`` from ``PATH``; the
processes here run with neither, as on a machine with no JDK installed, and must
fail before PySpark tries to start its JVM (whose failure is a traceback ending
in ``JAVA_GATEWAY_EXITED``, which never names Java).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lakelog import Catalog, Record
from tests.compaction.helpers import VENV_BIN, run, subprocess_env

pytestmark = pytest.mark.integration  # each test starts a lakelog process


def without_java(env: dict[str, str]) -> dict[str, str]:
    """``env`` with no ``JAVA_HOME`` and no ``PATH`` entry holding a ``java``."""
    stripped = {k: v for k, v in env.items() if k != "JAVA_HOME"}
    entries = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    stripped["PATH"] = os.pathsep.join(p for p in entries if not Path(p, "java").exists())
    return stripped


def assert_names_java(line: str) -> None:
    assert "Spark needs Java 17" in line and "JAVA_HOME" in line and "PATH" in line, line


def test_compaction_without_java_is_one_line(tmp_path: Path) -> None:
    """``lakelog compact`` of a topic with work to do fails with one line and exit code 1."""
    root = str(tmp_path / "root")
    catalog = Catalog(root)
    catalog.create_topic("users", 1, {"cleanup.policy": "compact"})
    for i in range(5):
        catalog.topic("users").append([Record(f"v{i}".encode(), key=f"u{i % 2}".encode())])
    catalog.close()
    args = ["compact", "--root", root, "--force", "--no-progress", "--no-history"]
    done = run([str(VENV_BIN / "lakelog"), *args], without_java(subprocess_env()))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "JAVA_GATEWAY_EXITED" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: compact of topic 'users' failed: Spark needs Java 17")
    assert_names_java(line)


def test_spark_session_without_java_raises_lakelogs_error() -> None:
    """The session helper raises ``MissingDependencyError`` before PySpark runs its launcher."""
    code = """
from compaction.spark_session import spark_session
from lakelog.errors import MissingDependencyError
try:
    spark_session()
except MissingDependencyError as exc:
    print(exc)
"""
    done = run([sys.executable, "-c", code], without_java(subprocess_env()))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # PySpark's launcher never ran (it reports on stderr)
    (line,) = done.stdout.splitlines()
    assert_names_java(line)


def test_a_java_home_without_java_is_named(tmp_path: Path) -> None:
    """A ``JAVA_HOME`` that holds no ``bin/java`` is what PySpark would run: it is named."""
    env = without_java(subprocess_env())
    env["JAVA_HOME"] = str(tmp_path)
    code = "from compaction.spark_session import spark_session\nspark_session()"
    done = run([sys.executable, "-c", code], env)
    assert done.returncode == 1
    assert "JAVA_GATEWAY_EXITED" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("lakelog.errors.MissingDependencyError: Spark needs Java 17")
    assert f"JAVA_HOME={tmp_path} holds no bin/java" in last
