"""CLI start-up: how long ``lakelog`` takes to answer, beside ``python -c pass``.

Every figure is the wall time of a fresh interpreter running the command to its
exit, the median of ``runs`` runs, with ``python -c pass`` (the interpreter's own
start-up, the floor of any Python tool) timed in the same run as the baseline:
``lakelog --version`` and ``lakelog --help`` (which load no client, Arrow or Delta
code), a command's own ``--help``, and ``lakelog topics --list`` against a broker
subprocess over a temporary local root (a command that talks to a broker).
Goals: ``--version`` and ``--help`` within 0.3 s of the baseline, the broker
command within 1 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import PROJECT, Progress, Report, Result, config_for, scratch_dir
from benchmarks.servers import project_env, start_broker

NAME = "cli"
DESCRIPTION = "CLI start-up: lakelog --version, --help and a broker command beside python -c pass"
BASELINE = "python -c pass"
STARTUP = "CLI start-up"
#: How far above the baseline each command may answer (seconds), by command.
GOALS = {"--version": 0.3, "--help": 0.3}
BROKER_COMMAND_GOAL_S = 1.0


@dataclass(frozen=True)
class CliBenchConfig:
    runs: int


CONFIGS = {"tiny": CliBenchConfig(2), "small": CliBenchConfig(7), "large": CliBenchConfig(15)}


def wall_seconds(argv: list[str], env: dict[str, str], runs: int) -> float:
    """The median wall time of ``argv`` run to its exit; a failed run is an error."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=PROJECT, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """The ``cli`` suite at a named size (tiny, small, large)."""
    cfg = config_for(CONFIGS, size)
    report = Report(NAME)
    env = project_env()
    lakelog = [sys.executable, "-m", "lakelog.cli"]
    with scratch_dir(workdir, "cli") as scratch:
        broker = start_broker(scratch / "root", scratch)
        try:
            commands = {
                "--version": [*lakelog, "--version"],
                "--help": [*lakelog, "--help"],
                "topics --help": [*lakelog, "topics", "--help"],
                "topics --list (a broker)": [
                    *lakelog,
                    "topics",
                    "--list",
                    "--bootstrap-server",
                    broker.url,
                ],
            }
            progress(f"{BASELINE}: {cfg.runs} runs")
            baseline = wall_seconds([sys.executable, "-c", "pass"], env, cfg.runs)
            found = {}
            for label, argv in commands.items():
                progress(f"lakelog {label}: {cfg.runs} runs")
                found[label] = wall_seconds(argv, env, cfg.runs)
        finally:
            broker.stop()
    params = {"runs": cfg.runs}
    for label, seconds in found.items():
        report.add(
            Result(
                STARTUP,
                f"lakelog {label}",
                "wall time",
                seconds,
                "s",
                {BASELINE: baseline},
                higher_is_better=False,
                params=params,
            )
        )
    for label, allowed in GOALS.items():
        above = found[label] - baseline
        verdict = "met" if above <= allowed else "NOT met"
        report.notes.append(
            f"lakelog {label}: {found[label]:.3f} s, {above:.3f} s above {BASELINE} "
            f"({baseline:.3f} s): {verdict} (goal: within {allowed} s of it)"
        )
    broker_s = found["topics --list (a broker)"]
    verdict = "met" if broker_s <= BROKER_COMMAND_GOAL_S else "NOT met"
    report.notes.append(
        f"lakelog topics --list against a broker: {broker_s:.3f} s: {verdict} "
        f"(goal: within {BROKER_COMMAND_GOAL_S} s)"
    )
    report.notes.append(f"each figure: the median of {cfg.runs} runs of a fresh interpreter")
    return report
