"""A Spark suite run again on another master, its figures printed beside local[2]'s.

``python -m benchmarks compaction connector --master spark://host:7077`` runs
each suite as usual (``local[2]``, in this process) and then once more in a
subprocess whose sessions are built against the given master
(``LAKELOG_SPARK_MASTER``), since a process holds one SparkContext. The
second run's JSON comes back and every figure, lakelog's and each
baseline's, is printed in one table with both runs side by side, so the
cluster's figures are compared with figures measured on this machine in the
same invocation.

The suites' storage roots are made under ``--workdir``; on workers of other
hosts that must be a path they all see (a shared filesystem).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Report, format_number, format_ratio, ratio, render_table

#: Suites whose work runs on Spark, so a master changes where it runs.
SPARK_SUITES = ("compaction", "connector")
LOCAL = "local[2]"


def run_on_master(
    suite: str, size: str, master: str, workdir: Path | None, quiet: bool
) -> list[dict[str, Any]]:
    """Run ``suite`` in a subprocess whose Spark sessions use ``master``; its JSON results."""
    with tempfile.TemporaryDirectory(prefix=f"lakelog-bench-{suite}-master-") as tmp:
        out = Path(tmp) / "results.json"
        command = [sys.executable, "-m", "benchmarks", suite, "--size", size, "--json", str(out)]
        if workdir is not None:
            command += ["--workdir", str(workdir)]
        if quiet:
            command.append("--quiet")
        env = {**os.environ, "LAKELOG_SPARK_MASTER": master}
        # Its own tables go to stderr (progress); the side-by-side table is what stdout gets.
        done = subprocess.run(command, env=env, stdout=sys.stderr, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"suite {suite} on {master} exited with code {done.returncode}")
        results: list[dict[str, Any]] = json.loads(out.read_text())
        return results


def figures(items: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str, str], float | None]:
    """(benchmark, variant, metric [unit], who) -> figure, who being lakelog or a baseline."""
    out: dict[tuple[str, str, str, str], float | None] = {}
    for item in items:
        metric = f"{item['metric']} [{item['unit']}]"
        key = (str(item["benchmark"]), str(item["variant"]), metric)
        out[(*key, "lakelog")] = item["value"]
        for name, value in dict(item["baselines"]).items():
            out[(*key, str(name))] = value
    return out


def side_by_side(local: Report, remote: Sequence[Mapping[str, Any]], master: str) -> str:
    """One table: every figure of both runs, in the local run's order, and remote / local."""
    here = figures([r.to_json() for r in local.results])
    there = figures(remote)
    rows = []
    for key in [*here, *(k for k in there if k not in here)]:
        benchmark, variant, metric, who = key
        mine, theirs = here.get(key), there.get(key)
        change = ratio(theirs, mine) if mine is not None and theirs is not None else None
        rows.append(
            [
                benchmark,
                variant,
                metric,
                who,
                format_number(mine),
                format_number(theirs),
                format_ratio(change),
            ]
        )
    headers = ["benchmark", "variant", "metric", "figure", LOCAL, master, "ratio"]
    title = f"== suite {local.suite}: {master} beside {LOCAL} (ratio = {master} / {LOCAL})"
    return f"{title}\n{render_table(headers, rows)}"
