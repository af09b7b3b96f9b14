"""scripts/dev.sh installs what its command needs, once, and skips pip when nothing changed.

The install-state logic is tested on its own; the script itself runs for real
(bash, its own checks, scripts/install_state.py) in a copy of the project
whose ``.venv/bin`` holds stand-ins for pip and the tools, which log how
they were called, so no package is downloaded.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.install_state import extras_closure, is_current, main, record
from tests.fixtures.brokers import PROJECT

pytestmark = pytest.mark.integration  # each test runs scripts/dev.sh or pip

PYPROJECT = PROJECT / "pyproject.toml"


def test_extras_pull_in_the_extras_they_name() -> None:
    text = PYPROJECT.read_text()
    assert extras_closure(text, ["broker"]) == {"broker"}
    assert extras_closure(text, ["all"]) == {"all", "broker", "spark", "notebooks"}
    assert extras_closure(text, ["dev"]) >= {"dev", "test", "all", "broker", "spark"}
    with pytest.raises(SystemExit, match="no extra 'nope'"):
        extras_closure(text, ["nope"])


def test_state_covers_what_was_installed_for_this_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    shutil.copy(PYPROJECT, pyproject)
    venv = tmp_path / ".venv"
    venv.mkdir()
    assert not is_current(venv, pyproject, ["broker"])  # never installed
    record(venv, pyproject, ["broker"])
    assert is_current(venv, pyproject, ["broker"])
    assert not is_current(venv, pyproject, ["dev"])  # run, then test: test installs
    record(venv, pyproject, ["dev"])
    assert is_current(venv, pyproject, ["dev"]) and is_current(venv, pyproject, ["broker"])
    assert is_current(venv, pyproject, ["spark"])  # dev includes everything
    pyproject.write_text(pyproject.read_text() + "\n# changed\n")
    assert not is_current(venv, pyproject, ["broker"])  # pyproject.toml changed
    record(venv, pyproject, ["broker"])
    assert not is_current(venv, pyproject, ["dev"])  # the old dev install does not count
    (venv / "lakelog-install.json").write_text("{torn")
    assert not is_current(venv, pyproject, ["broker"])


def test_usage_errors() -> None:
    assert main([]) == 2 and main(["nope", ".venv", "broker"]) == 2


STAND_IN = """#!/usr/bin/env bash
echo "{name} $*" >> "$DEV_SH_LOG"
"""

PYTHON_STAND_IN = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    shift 2
    echo "pip $*" >> "$DEV_SH_LOG"
    exit 0
fi
exec {python} "$@"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of what dev.sh reads, with stand-ins for the venv's programs."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("scripts/dev.sh", "scripts/install_state.py", "pyproject.toml"):
        shutil.copy(PROJECT / name, root / name)
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    programs = {"python": PYTHON_STAND_IN.format(python=sys.executable)}
    programs.update({name: STAND_IN.format(name=name) for name in ("lakelog", "ruff", "mypy")})
    programs["pytest"] = STAND_IN.format(name="pytest")
    for name, text in programs.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return root


def dev_sh(checkout: Path, *args: str) -> list[str]:
    """Run ``bash scripts/dev.sh ARGS``; the calls the stand-ins saw."""
    log = checkout / "calls.log"
    log.write_text("")
    env = {**os.environ, "DEV_SH_LOG": str(log), "PYTHON": sys.executable}
    env.pop("LAKELOG_ROOT", None)
    done = subprocess.run(
        ["bash", "scripts/dev.sh", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_run_installs_the_broker_extra_once(checkout: Path) -> None:
    first = dev_sh(checkout, "run", "--port", "9000")
    assert first == [
        "pip install --quiet --upgrade pip",
        "pip install --quiet --editable .[broker]",
        "lakelog broker start --root ./data/lakelog --port 9000",
    ]
    # A restart runs no pip at all.
    assert dev_sh(checkout, "run") == ["lakelog broker start --root ./data/lakelog"]


def test_test_upgrades_a_run_venv_to_the_dev_install(checkout: Path) -> None:
    dev_sh(checkout, "run")
    calls = dev_sh(checkout, "test", "-x")
    assert calls[:2] == [
        "pip install --quiet --upgrade pip",
        "pip install --quiet --editable .[dev]",
    ]
    assert calls[2:] == [
        "ruff check .",
        "ruff format --check .",
        "mypy lakelog server compaction spark_connector tests benchmarks",
        "pytest -n auto --dist worksteal -x",
    ]
    assert dev_sh(checkout, "test")[0] == "ruff check ."  # installed now
    assert dev_sh(checkout, "run") == ["lakelog broker start --root ./data/lakelog"]


def test_a_changed_pyproject_installs_again(checkout: Path) -> None:
    dev_sh(checkout, "run")
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n# a new dependency, say\n")
    assert "pip install --quiet --editable .[broker]" in dev_sh(checkout, "run")
