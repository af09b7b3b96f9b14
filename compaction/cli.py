"""``lakelog compact|retention|merge|vacuum|maintain|scheduler``: the maintenance commands.

Registered through the ``lakelog.commands`` entry point (the core never
imports compaction); ``compaction/job.py`` reuses the same parsers under
spark-submit. Progress goes to stderr, one report line per job and topic to
stdout; the exit code is 1 if any job failed.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

from compaction.defaults import DEFAULT_GRACE_MS, JOBS
from lakelog.cli.common import ROOT_ENV, ROOT_KINDS, storage_root

if TYPE_CHECKING:  # the heavy modules (Spark, delta-rs) are imported when a command runs
    from pyspark.sql import SparkSession

    from compaction.runner import JobOptions
    from lakelog.catalog import Catalog

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "compact": (
        ("compact",),
        "key-based compaction: keep the latest record per key (compacted topics)",
    ),
    "retention": (("retention",), "remove segments past retention.ms / retention.bytes"),
    "merge": (("merge",), "merge runs of small segments into segment.bytes-sized ones"),
    "vacuum": (("vacuum",), "delete files unreferenced for longer than the grace period"),
    "maintain": (JOBS, "retention, compact, merge and vacuum, in that order"),
}


def register(sub: SubParsers) -> None:
    """Every maintenance command (``compaction/job.py``'s parser)."""
    for name in COMMANDS:
        register_job_command(sub, name)
    register_scheduler(sub)


def register_job_command(sub: SubParsers, name: str) -> None:
    jobs, help_text = COMMANDS[name]
    parser = sub.add_parser(name, help=help_text, description=help_text)
    add_common_arguments(parser)
    add_job_arguments(parser, jobs)
    parser.set_defaults(run=run_command, jobs=jobs, command_name=name)


# The ``lakelog.commands`` entry points: one per command (see pyproject.toml).
register_compact = functools.partial(register_job_command, name="compact")
register_retention = functools.partial(register_job_command, name="retention")
register_merge = functools.partial(register_job_command, name="merge")
register_vacuum = functools.partial(register_job_command, name="vacuum")
register_maintain = functools.partial(register_job_command, name="maintain")


def register_scheduler(sub: SubParsers) -> None:
    parser = sub.add_parser(
        "scheduler",
        help="run retention, compaction, merging and vacuum on their intervals",
        description="Run the maintenance jobs of a root on their intervals until SIGTERM "
        "(settings: log.retention.check.interval.ms, log.compaction.interval.ms, "
        "log.merge.interval.ms, log.vacuum.interval.ms, log.vacuum.grace.ms; from the "
        "--config file or LAKELOG_* variables).",
    )
    add_common_arguments(parser)
    parser.add_argument("--config", help="settings file (.properties or .json; default: none)")
    parser.add_argument("--once", action="store_true", help="run every job once and exit")
    parser.add_argument("--log-level", help="debug, info, warning, error (default info)")
    parser.set_defaults(run=run_scheduler)


def run_scheduler(args: argparse.Namespace) -> int:
    from compaction.scheduler import run_command as run_scheduler_command

    return run_scheduler_command(args)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: when job.py also takes --root/--master before the command, the
    # sub-command's absent option must not overwrite the value given there.
    parser.add_argument(
        "--root",
        default=argparse.SUPPRESS,
        help=f"storage root URL: {ROOT_KINDS} (default: ${ROOT_ENV}, or for the "
        "scheduler root= in --config; one of them is required)",
    )
    parser.add_argument(
        "--master",
        default=argparse.SUPPRESS,
        help="Spark master (default: spark-submit's, else $LAKELOG_SPARK_MASTER or local[2])",
    )


def add_job_arguments(parser: argparse.ArgumentParser, jobs: tuple[str, ...]) -> None:
    parser.add_argument(
        "--topic",
        dest="topics",
        action="extend",
        nargs="+",
        metavar="T",
        help="topic(s) to process (repeatable; default: every topic of the root)",
    )
    if "compact" in jobs:
        parser.add_argument(
            "--force",
            action="store_true",
            help="clean every cleanable partition whatever its dirty ratio",
        )
    if "vacuum" in jobs:
        parser.add_argument(
            "--grace-ms",
            type=int,
            default=DEFAULT_GRACE_MS,
            help="delete removed files unreferenced for longer than this (default 7 days)",
        )
        parser.add_argument(
            "--orphan-grace-ms",
            type=int,
            help="delete never-committed files older than this "
            "(default: the larger of --grace-ms and one day)",
        )
    if {"retention", "compact", "merge"} & set(jobs):
        parser.add_argument(
            "--now-ms",
            type=int,
            help="evaluate time-based rules as of this epoch-ms instant (default: now)",
        )
    parser.add_argument(
        "--no-history", action="store_true", help="do not append to the jobs-history table"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run_command(args: argparse.Namespace) -> int:
    from compaction.runner import JobOptions
    from compaction.spark_session import spark_session
    from lakelog.catalog import Catalog

    jobs: tuple[str, ...] = args.jobs
    options = JobOptions(
        force=getattr(args, "force", False),
        grace_ms=getattr(args, "grace_ms", DEFAULT_GRACE_MS),
        orphan_grace_ms=getattr(args, "orphan_grace_ms", None),
        now_ms=getattr(args, "now_ms", None),
    )
    catalog = Catalog(storage_root(args))
    try:
        return run_jobs(
            catalog,
            jobs,
            args.topics,
            # Spark starts (or is joined) on first use only: planning needs no cluster.
            functools.cache(lambda: spark_session(getattr(args, "master", None))),
            options,
            explicit=args.command_name == "compact" and bool(args.topics),
            history=not args.no_history,
            progress=not args.no_progress,
        )
    finally:
        catalog.close()


def run_jobs(
    catalog: Catalog,
    jobs: tuple[str, ...],
    topics: list[str] | None,
    spark: Callable[[], SparkSession],
    options: JobOptions,
    *,
    explicit: bool = False,
    history: bool = True,
    progress: bool = True,
) -> int:
    """Run ``jobs`` on each topic (in that order per topic); print reports; 1 if any failed.

    Named topics are checked first, so a typo (or compacting a topic that is not
    compacted, when ``explicit``) fails before any work starts.
    """
    from tqdm import tqdm

    from compaction.compact import require_compacted
    from compaction.report import append_history
    from compaction.runner import Outcome, error_message, run_job
    from lakelog.errors import LakelogError

    started = time.perf_counter()
    if topics:
        names = list(dict.fromkeys(topics))
        for name in names:
            config = catalog.topic(name).config  # UNKNOWN_TOPIC_OR_PARTITION before any work
            if explicit and "compact" in jobs:
                require_compacted(name, config)
    else:
        names = catalog.list_topics()
    outcomes: list[Outcome] = []
    with tqdm(
        total=len(names) * len(jobs),
        file=sys.stderr,
        unit="job",
        disable=not progress,
        dynamic_ncols=True,
    ) as bar:
        for name in names:
            for job in jobs:
                bar.set_description(f"{job} {name}")
                outcome = run_job(
                    job,
                    catalog,
                    name,
                    spark,
                    options,
                    explicit=explicit,
                    progress=bar.set_postfix_str,
                )
                outcomes.append(outcome)
                bar.update()
    for outcome in outcomes:
        print(outcome.report.render())
    failed = [o for o in outcomes if o.failed]
    counts = {s: sum(o.report.status == s for o in outcomes) for s in ("ok", "skipped", "failed")}
    print(
        f"{'+'.join(jobs)}: {len(names)} topic(s), {counts['ok']} ok, {counts['skipped']} "
        f"skipped, {counts['failed']} failed in {time.perf_counter() - started:.1f}s"
    )
    for outcome in failed:
        assert outcome.error is not None
        if not isinstance(outcome.error, LakelogError):  # a bug: show where
            traceback.print_exception(outcome.error, file=sys.stderr)
        print(
            f"Error: {outcome.report.job} of topic {outcome.report.topic!r} failed: "
            f"{outcome.report.message}",
            file=sys.stderr,
        )
    if history:
        recorded = [o.report for o in outcomes if o.report.status != "skipped"]
        try:
            append_history(catalog.storage, recorded)
        except Exception as exc:
            print(
                f"Error: cannot append to the jobs history: {error_message(exc)}", file=sys.stderr
            )
            return 1
    return 1 if failed else 0
