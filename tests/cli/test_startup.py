"""What a command loads before it runs: ``--version`` and ``--help`` load no client, Arrow,
Delta or broker code, a command's ``--help`` at most its client, and a command over a
broker no Delta layer. Start-up time is
measured in benchmarks/bench_cli.py; here the modules a fresh interpreter imported are
checked, which is what the time comes from."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.tool import tool_env
from tests.fixtures.brokers import PROJECT

pytestmark = pytest.mark.integration  # each test runs the lakelog CLI as a process

HEAVY = ("pyarrow", "deltalake", "httpx", "pydantic_settings", "server.app", "uvicorn", "pyspark")


def loaded_by(*argv: str) -> set[str]:
    """The heavy modules ``lakelog argv`` imported by the time it exited."""
    code = f"""
import json, sys
from lakelog.cli import main
try:
    main({list(argv)!r})
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=tool_env(LAKELOG_BOOTSTRAP_SERVER="http://127.0.0.1:9"),
        cwd=PROJECT,
        timeout=120,
        check=False,
    )
    last = done.stderr.strip().splitlines()[-1]
    return set(json.loads(last))


@pytest.mark.parametrize("argv", [("--version",), ("--help",), ("broker", "--help")])
def test_version_and_help_load_nothing_heavy(argv: tuple[str, ...]) -> None:
    assert loaded_by(*argv) == set()


def test_a_commands_help_loads_its_client_only() -> None:
    assert loaded_by("topics", "--help") <= {"httpx"}


def test_a_command_over_a_broker_loads_no_delta_layer() -> None:
    loaded = loaded_by("topics", "--list", "--connect-timeout-ms", "200")
    assert "httpx" in loaded  # it did try the broker
    assert not loaded & {"deltalake", "server.app", "uvicorn", "pyspark"}
