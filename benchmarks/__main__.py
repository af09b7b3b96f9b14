"""``python -m benchmarks <suite ...|all> [--size tiny|small|large] [--json OUT]``.

``python -m benchmarks report --sizes small,large`` runs every suite at each
size and writes JSON, figures and docs/performance.md (``benchmarks/report.py``).

Each suite is a module (see :class:`benchmarks.common.Suite`) registered in
``SUITES``; several names run those suites in the order given, ``all`` runs
every one in registry order. Results are printed as tables,
each lakelog figure next to its baselines from the same run, and optionally
written as a JSON list.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from benchmarks.common import (
    SIZES,
    Progress,
    Report,
    Suite,
    machine_info,
    quiet,
    render_machine,
    render_report,
    stderr_progress,
    write_json,
)

#: suite name -> module implementing it; future suites (broker, compaction, connector) go here.
SUITES: dict[str, str] = {
    "log": "benchmarks.bench_log",
    "broker": "benchmarks.bench_broker",
    "brokers": "benchmarks.bench_brokers",
    "connector": "benchmarks.bench_connector",
    "soak": "benchmarks.bench_soak",
    "groups": "benchmarks.bench_groups",
    "compaction": "benchmarks.bench_compaction",
    "kafka-codec": "benchmarks.bench_kafka_codec",
    "kafka": "benchmarks.bench_kafka",
    "schema-registry": "benchmarks.bench_schema_registry",
    "schemas": "benchmarks.bench_schemas",
    "typed-sql": "benchmarks.bench_typed_sql",
    "cli": "benchmarks.bench_cli",
}


def load_suite(name: str) -> Suite:
    module = importlib.import_module(SUITES[name])
    return cast(Suite, module)


def _broker_phases(text: str) -> str:
    """``--phases`` as given, once every name in it is known (argparse reports the error)."""
    from benchmarks.bench_broker import selected_phases

    try:
        selected_phases(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="lakelog benchmarks: every figure next to its baselines from the same run.",
    )
    parser.add_argument(
        "suites",
        nargs="+",
        choices=[*SUITES, "all"],
        metavar="SUITE",
        help=f"suites to run, in this order, or all ({', '.join(SUITES)})",
    )
    parser.add_argument(
        "--size",
        choices=SIZES,
        default="small",
        help="small: about a minute; large: a few minutes; tiny: smoke test only",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results here")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="parent of the temporary storage roots (default: the system temp dir)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="Spark suites (compaction, connector) only: run each again with this Spark master "
        "(e.g. spark://host:7077) and print its figures beside local[2]'s",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="duration of time-bounded suites (soak), overriding --size",
    )
    parser.add_argument(
        "--phases",
        default=None,
        type=_broker_phases,
        metavar="LIST",
        help="comma-separated phases of the broker suite to run (produce, shapes, latency, "
        "e2e, fetch; latency and e2e need produce); default: all",
    )
    parser.add_argument(
        "--regime",
        default=None,
        metavar="KEY",
        help="brokers suite: run only this regime (commit-bound or cpu-bound)",
    )
    parser.add_argument(
        "--brokers",
        default=None,
        metavar="N,N",
        help="brokers suite: run only these broker counts, e.g. 1,3",
    )
    args = parser.parse_args(argv)
    if args.master is not None:
        from benchmarks.masters import SPARK_SUITES

        others = [s for s in args.suites if s not in SPARK_SUITES]
        if others:
            parser.error(
                f"--master applies to the Spark suites ({', '.join(SPARK_SUITES)}), "
                f"not to {', '.join(others)}"
            )
    return args


def run_suite(name: str, size: str, workdir: Path | None, progress: Progress) -> Report:
    suite = load_suite(name)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"lakelog-bench-{name}-", dir=workdir) as tmp:
        report = suite.run(size, Path(tmp), progress)
    report.seconds = time.perf_counter() - start
    return report


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:  # every suite at several sizes -> JSON, figures, performance.md
        from benchmarks.report import main as report_main

        return report_main(argv[1:], list(SUITES), run_suite)
    args = parse_args(argv)
    if args.minutes is not None:
        os.environ["LAKELOG_BENCH_MINUTES"] = str(args.minutes)
    if args.phases is not None:
        from benchmarks.bench_broker import PHASES_ENV

        os.environ[PHASES_ENV] = args.phases
    if args.regime is not None:
        os.environ["LAKELOG_BENCH_REGIME"] = args.regime
    if args.brokers is not None:
        os.environ["LAKELOG_BENCH_BROKER_COUNTS"] = args.brokers
    names = list(SUITES) if "all" in args.suites else list(dict.fromkeys(args.suites))
    machine = machine_info()
    print(render_machine(machine))
    print(f"size: {args.size}\n", flush=True)
    reports = []
    for name in names:
        progress = quiet if args.quiet else stderr_progress(name)
        report = run_suite(name, args.size, args.workdir, progress)
        reports.append(report)
        print(render_report(report) + "\n", flush=True)
        if args.master is not None:
            from benchmarks.masters import run_on_master, side_by_side

            remote = run_on_master(name, args.size, args.master, args.workdir, args.quiet)
            print(side_by_side(report, remote, args.master) + "\n", flush=True)
    if args.json is not None:
        write_json(args.json, reports, machine)
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
