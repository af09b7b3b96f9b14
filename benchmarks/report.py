"""``python -m benchmarks report --sizes small,large [--out benchmarks/results]``.

Runs every suite registered in ``benchmarks/__main__.py`` at each size, writes
the results as JSON (one file per size, the format of ``--json``), draws the
figures into ``docs/img/`` and writes ``docs/performance.md``: the figures,
every table with the baselines measured in the same run, and the machine.

A suite that crashes does not stop the others: its traceback is printed, the
report says it failed, and the command exits with status 1, so a partial
report is never mistaken for a complete one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import plots
from benchmarks.common import (
    PROJECT,
    SIZES,
    JSONScalar,
    Progress,
    Report,
    Result,
    machine_info,
    quiet,
    render_report,
    results_json,
    stderr_progress,
    write_json,
)

RunSuite = Callable[[str, str, Path | None, Progress], Report]


@dataclass
class SizeRun:
    """What one size produced: the suites' reports, and the suites that crashed (with traceback)."""

    size: str
    reports: list[Report] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0
    #: when this size's newest suite finished (``--add`` keeps older suites of a size)
    finished: datetime.datetime | None = None


def parse_sizes(text: str) -> list[str]:
    """``"small,large"`` -> ``["small", "large"]``; an unknown or repeated size is an error."""
    sizes = [s.strip() for s in text.split(",") if s.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError("--sizes needs at least one size")
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}"
        )
    if len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"--sizes repeats a size: {text}")
    return sizes


def parse_args(argv: Sequence[str] | None, suites: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks report",
        description="Run every benchmark suite at each size; write JSON, figures and "
        "docs/performance.md.",
    )
    parser.add_argument("--sizes", type=parse_sizes, default=["small"], help="e.g. small,large")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results"), help="directory for results JSON"
    )
    parser.add_argument(
        "--img-dir", type=Path, default=PROJECT / "docs" / "img", help="directory for PNG figures"
    )
    parser.add_argument(
        "--doc", type=Path, default=PROJECT / "docs" / "performance.md", help="markdown report"
    )
    parser.add_argument(
        "--suites",
        default=",".join(suites),
        help=f"comma-separated subset of the registered suites ({', '.join(suites)})",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="parent of temporary roots")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the saved results in --out and add (or replace) only the suites run now",
    )
    parser.add_argument(
        "--redraw",
        action="store_true",
        help="measure nothing: redraw the figures and the markdown from the results in --out",
    )
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in str(args.suites).split(",") if s.strip()]
    unknown = [s for s in chosen if s not in suites]
    if unknown or not chosen:
        parser.error(
            f"--suites: unknown {', '.join(unknown) or '(none given)'}; registered: "
            f"{', '.join(suites)}"
        )
    args.suites = chosen
    return args


# -- the machine -------------------------------------------------------------


def _meminfo_bytes(field_name: str = "MemTotal") -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, JSONScalar]:
    """``benchmarks.common.machine_info`` plus RAM, Spark and the load when the run started."""
    info: dict[str, JSONScalar] = dict(machine_info())
    ram = _meminfo_bytes()
    info["ram_gib"] = round(ram / 2**30, 1) if ram is not None else None
    info["pyspark"] = _version("pyspark")
    info["load_average_1m_at_start"] = round(os.getloadavg()[0], 2)
    return info


# -- running -----------------------------------------------------------------


def run_size(
    size: str, suites: Sequence[str], run_suite: RunSuite, workdir: Path | None, verbose: bool
) -> SizeRun:
    """Every suite at one size; a crash is recorded with its traceback and the next suite runs."""
    run = SizeRun(size)
    start = time.perf_counter()
    for name in suites:
        progress = stderr_progress(f"{size}/{name}") if verbose else quiet
        try:
            report = run_suite(name, size, workdir, progress)
        except Exception:
            run.failures[name] = traceback.format_exc()
            print(f"suite {name} at size {size} FAILED:\n{run.failures[name]}", file=sys.stderr)
            continue
        run.reports.append(report)
        print(render_report(report) + "\n", flush=True)
    run.seconds = time.perf_counter() - start
    return run


def draw(run: SizeRun, results: Sequence[Mapping[str, object]], img_dir: Path) -> None:
    """The figures of one size, named ``perf-<size>-<figure>.png``; absent data draws nothing."""
    figures = {
        "throughput": plots.plot_throughput,
        "latency": plots.plot_latency,
        "compaction": plots.plot_compaction_scaling,
        "brokers": plots.plot_broker_scaling,
    }
    for name, plot in figures.items():
        path = plot(results, img_dir / f"perf-{run.size}-{name}.png", run.size)
        if path is not None:
            run.figures[name] = path


# -- markdown ----------------------------------------------------------------

FIGURE_TEXT = {
    "throughput": "Throughput (records/s) versus records per batch or request, "
    "lakelog next to the baselines measured in the same run (log scales).",
    "latency": "Latency percentiles in milliseconds, lakelog next to its baselines (log scale).",
    "compaction": "Compaction measurements against the workload size that varies.",
    "brokers": "Records/s and commits/s against the number of broker processes on one root: "
    "lakelog is one hot topic, the baseline one topic per broker (log scales).",
}

MISSING_FIGURE = {
    "throughput": "no result in this run has both records/s and a batch-size parameter.",
    "latency": "no result in this run is a latency percentile.",
    "compaction": "no suite named `compaction` is registered in `benchmarks/__main__.py` yet, "
    "or it measured a single size only.",
    "brokers": "no result in this run was measured per number of brokers.",
}


def _rel(path: Path, doc: Path) -> str:
    return Path(os.path.relpath(path.resolve(), doc.resolve().parent)).as_posix()


def render_markdown(
    runs: Sequence[SizeRun],
    machine_facts: Mapping[str, JSONScalar],
    command: str,
    doc: Path,
    json_paths: Mapping[str, Path],
    finished: datetime.datetime,
) -> str:
    """The whole ``performance.md`` (pure: everything it shows is passed in)."""
    lines = [
        "# Performance",
        "",
        "<!-- Generated by `python -m benchmarks report`; do not edit by hand. -->",
        "",
        f"Produced by `{command}`, finished {finished:%Y-%m-%d %H:%M} UTC. Every lakelog "
        "figure is shown next to its baselines (raw Parquet, naive delta-rs, an empty "
        "uvicorn route, `spark.read.parquet`, ...) **measured in the same run on the same "
        "machine**; ratios are lakelog / baseline.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in machine_facts.items()]
    lines += [
        "",
        "Each suite's processes (brokers, clients, the S3 server, Spark) run beside its "
        "baselines on the same cores, and its notes give the load average at its start and "
        "end, so absolute figures vary from run to run more than the ratios do: compare "
        "ratios within one run, not absolute numbers across runs.",
        "",
        "Reproduce: `python -m benchmarks report --sizes small,large` (results JSON in "
        "`benchmarks/results/`, figures in `docs/img/`). A single suite: "
        "`python -m benchmarks <suite> --size small`.",
        "",
    ]
    for run in sorted(runs, key=lambda r: SIZES.index(r.size)):
        # Headings carry no durations, so links to them stay valid from run to run.
        suites = ", ".join(f"`{r.suite}`" for r in run.reports) or "none"
        when = f", finished {run.finished:%Y-%m-%d %H:%M} UTC" if run.finished else ""
        lines += [
            f"## Size `{run.size}`",
            "",
            f"Suites: {suites} ({run.seconds / 60:.1f} min{when}).",
            "",
        ]
        if run.size in json_paths:
            # Not a link: benchmarks/results/ may be left out of version control.
            lines += [f"Results JSON: `{_rel(json_paths[run.size], doc)}`", ""]
        for name, text in FIGURE_TEXT.items():
            if name in run.figures:
                lines += [f"![{name} ({run.size})]({_rel(run.figures[name], doc)})", "", text, ""]
            else:
                lines += [f"*No {name} figure:* {MISSING_FIGURE[name]}", ""]
        for name, trace in run.failures.items():
            last = trace.strip().splitlines()[-1] if trace.strip() else "unknown error"
            lines += [f"**Suite `{name}` failed** at this size: `{last}`", ""]
        for report in run.reports:
            lines += [f"### `{report.suite}` at size `{run.size}`", ""]
            lines += ["```text", render_report(report).strip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_summary(
    path: Path,
    runs: Sequence[SizeRun],
    machine_facts: Mapping[str, JSONScalar],
    json_paths: Mapping[str, Path],
    command: str,
    finished: datetime.datetime,
) -> None:
    """``report.json``: per size, the suites' durations, notes, failures and figure files."""
    summary = {
        "command": command,
        "finished": finished.isoformat(),
        "machine": dict(machine_facts),
        "sizes": {
            run.size: {
                "seconds": run.seconds,
                "finished": run.finished.isoformat() if run.finished else None,
                "results": str(json_paths[run.size]),
                "suites": {
                    r.suite: {"seconds": r.seconds, "results": len(r.results), "notes": r.notes}
                    for r in run.reports
                },
                "failed": {name: trace for name, trace in run.failures.items()},
                "figures": {name: str(p) for name, p in run.figures.items()},
            }
            for run in runs
        },
    }
    path.write_text(json.dumps(summary, indent=1) + "\n")


# -- redrawing from saved results ---------------------------------------------


def _number(value: object) -> float:
    """A saved figure (null stands for a non-finite one, see ``common.write_json``)."""
    return float(value) if isinstance(value, int | float) else math.nan


def result_from_json(item: Mapping[str, Any]) -> Result:
    """The inverse of ``Result.to_json`` (ratios and machine are derived, so dropped)."""
    return Result(
        benchmark=str(item["benchmark"]),
        variant=str(item["variant"]),
        metric=str(item["metric"]),
        value=_number(item["value"]),
        unit=str(item["unit"]),
        baselines={str(k): _number(v) for k, v in item["baselines"].items()},
        higher_is_better=bool(item["higher_is_better"]),
        params=dict(item["params"]),
    )


def load_run(size: str, entry: Mapping[str, Any], results_path: Path) -> SizeRun:
    """One size's reports, rebuilt from its results JSON and its entry in ``report.json``."""
    finished = entry.get("finished")
    run = SizeRun(
        size,
        seconds=float(entry["seconds"]),
        failures=dict(entry["failed"]),
        finished=datetime.datetime.fromisoformat(finished) if finished else None,
    )
    items = json.loads(results_path.read_text())
    for suite, info in entry["suites"].items():
        report = Report(suite, notes=list(info["notes"]), seconds=float(info["seconds"]))
        report.results = [result_from_json(i) for i in items if i["suite"] == suite]
        run.reports.append(report)
    return run


def saved_runs(out: Path) -> dict[str, SizeRun]:
    """The runs kept in ``out/report.json`` by size (none when there is no report yet)."""
    summary_path = out / "report.json"
    if not summary_path.exists():
        return {}
    summary = json.loads(summary_path.read_text())
    runs = {}
    for size, entry in summary["sizes"].items():
        path = Path(entry["results"])
        runs[size] = load_run(size, entry, path if path.is_absolute() else out / path.name)
    return runs


def merged(saved: SizeRun | None, new: SizeRun) -> SizeRun:
    """``saved`` with the suites of ``new`` replaced or added (``--add``)."""
    if saved is None:
        return new
    ran = {r.suite for r in new.reports} | set(new.failures)
    run = SizeRun(new.size, seconds=saved.seconds + new.seconds, finished=new.finished)
    run.reports = [r for r in saved.reports if r.suite not in ran] + new.reports
    run.failures = {k: v for k, v in saved.failures.items() if k not in ran} | new.failures
    return run


def redraw(out: Path, img_dir: Path, doc: Path) -> int:
    """Figures and markdown again from ``out/report.json`` and its results files."""
    summary_path = out / "report.json"
    if not summary_path.exists():
        print(f"--redraw: no {summary_path}; run the report first", file=sys.stderr)
        return 2
    summary = json.loads(summary_path.read_text())
    facts: dict[str, JSONScalar] = dict(summary["machine"])
    runs, json_paths = [], {}
    for size, entry in summary["sizes"].items():
        path = Path(entry["results"])
        json_paths[size] = path if path.is_absolute() else out / path.name
        run = load_run(size, entry, json_paths[size])
        draw(run, results_json(run.reports, facts), img_dir)
        runs.append(run)
    finished = (
        datetime.datetime.fromisoformat(summary["finished"])
        if "finished" in summary
        else datetime.datetime.fromtimestamp(summary_path.stat().st_mtime, datetime.UTC)
    )
    command = summary.get("command") or "python -m benchmarks report --sizes " + ",".join(
        summary["sizes"]
    )
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(render_markdown(runs, facts, command, doc, json_paths, finished))
    print(f"redrew {img_dir} and {doc} from {out}")
    return 0


def main(
    argv: Sequence[str] | None,
    suites: Sequence[str],
    run_suite: RunSuite,
) -> int:
    """Run the report over ``suites`` (the registry's names) with ``run_suite`` (the runner)."""
    args = parse_args(argv, suites)
    if args.redraw:
        return redraw(args.out, args.img_dir, args.doc)
    facts = machine()
    command = "python -m benchmarks report --sizes " + ",".join(args.sizes)
    if list(args.suites) != list(suites):
        command += " --suites " + ",".join(args.suites)
    if args.add:
        command += " --add"
    args.out.mkdir(parents=True, exist_ok=True)
    saved = saved_runs(args.out) if args.add else {}
    runs: list[SizeRun] = []
    json_paths: dict[str, Path] = {}
    for size in args.sizes:
        print(f"== size {size}: suites {', '.join(args.suites)}", flush=True)
        run = run_size(size, args.suites, run_suite, args.workdir, not args.quiet)
        run.finished = datetime.datetime.now(datetime.UTC)
        run = merged(saved.pop(size, None), run)
        json_paths[size] = args.out / f"results-{size}.json"
        write_json(json_paths[size], run.reports, facts)
        draw(run, results_json(run.reports, facts), args.img_dir)
        runs.append(run)
    for size, run in saved.items():  # --add: sizes not run now stay as they were
        json_paths[size] = args.out / f"results-{size}.json"
        runs.append(run)
    facts["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    finished = datetime.datetime.now(datetime.UTC)
    write_summary(args.out / "report.json", runs, facts, json_paths, command, finished)
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(render_markdown(runs, facts, command, args.doc, json_paths, finished))
    print(f"results in {args.out}, figures in {args.img_dir}, report {args.doc}")
    failed = [f"{run.size}/{name}" for run in runs for name in run.failures]
    if failed:
        print(f"FAILED suites: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
