"""Running ``python -m lakelog.cli`` as a user does: a separate process, a chosen directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lakelog.testing.env import child_env
from tests.fixtures.brokers import PROJECT

#: Variables a user's shell does not have: those that point the tools somewhere (a test
#: sets the ones it means), and unbuffered output (a tool's stdout into a pipe is
#: block-buffered for a user, and flushed at exit).
NOT_FROM_THE_TEST_RUN = ("LAKELOG_ROOT", "LAKELOG_BOOTSTRAP_SERVER", "PYTHONUNBUFFERED")


def tool_env(**variables: str) -> dict[str, str]:
    """This process's environment as a user's shell has it, plus ``variables``."""
    env = child_env(PROJECT)
    for name in NOT_FROM_THE_TEST_RUN:
        env.pop(name, None)
    env.update(variables)
    return env


def lakelog(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env if env is not None else tool_env(),
        cwd=cwd,
        timeout=180,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done
