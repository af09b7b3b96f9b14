"""``lakelog doctor``: check every topic of a storage root and repair what is safe."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable

from tqdm import tqdm

from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import add_root, storage_root
from lakelog.doctor import Finding, ScanOptions, repair, scan_root
from lakelog.doctor.scan import DEFAULT_BROKER_STALE_S, DEFAULT_GRACE_S
from lakelog.offset_index import Segment
from lakelog.storage import open_storage

DESCRIPTION = """\
Checks, for every topic: the Delta log is readable and its commits contiguous;
every live segment exists, is Parquet of the segment schema and holds the
offsets its tags claim; offsets are dense per partition up to the high
watermark; high-watermark transactions match the partitions; the topic pointer
names a table; every record of `__consumer_offsets` decodes as a committed
offset. For the root: tables no topic points to, Spark `_staging/` leftovers,
and broker registry entries nobody refreshes.

--repair deletes ONLY: files of a table that the Delta log does not reference
and that are older than --grace-seconds (default 7 days, Delta's file
retention, so in-flight appends and readers of older snapshots are never
affected); tables no pointer names and staging directories older than the
grace period; broker entries not refreshed for --broker-stale-seconds (a live
broker rewrites its entry every heartbeat). It drops records of
`__consumer_offsets` that are not committed offsets (consumer groups already
skip them) by rewriting their segments without them in one Delta commit;
every other record keeps its offset. It never edits or deletes a Delta
commit, even a corrupt one: commits are written atomically by put-if-absent,
so a damaged one was damaged after it was acknowledged, and deleting it would
drop acknowledged records and let another writer reuse its version. Those
findings need an operator (restore the file from a backup).

Exit code: 0 when no problem remains, 1 otherwise.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "doctor",
        help=COMMANDS["doctor"].help,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_root(parser)
    parser.add_argument(
        "--topic", help="check only this topic (root-wide checks are skipped; default: all)"
    )
    parser.add_argument(
        "--repair", action="store_true", help="delete what is safe to delete, drop bad records"
    )
    parser.add_argument("--json", action="store_true", help="print findings as JSON")
    parser.add_argument(
        "--grace-seconds",
        type=float,
        default=DEFAULT_GRACE_S,
        help="orphans younger than this are reported, never deleted (default: 7 days)",
    )
    parser.add_argument(
        "--broker-stale-seconds",
        type=float,
        default=DEFAULT_BROKER_STALE_S,
        help="a broker entry not refreshed for this long is stale (default: 1 hour)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    storage = open_storage(storage_root(args))
    show_bar = not args.json and sys.stderr.isatty()

    def progress(items: Iterable[Segment], total: int, label: str) -> Iterable[Segment]:
        bar: Iterable[Segment] = tqdm(
            items, total=total, desc=f"segments of {label}", disable=not show_bar
        )
        return bar

    options = ScanOptions(
        topic=args.topic,
        grace_s=args.grace_seconds,
        broker_stale_s=args.broker_stale_seconds,
        progress=progress,
    )
    findings = scan_root(storage, options)
    repaired: list[Finding] = repair(storage, findings) if args.repair else []
    remaining = [f for f in findings if f not in repaired]
    if args.json:
        print(
            json.dumps(
                {
                    "root": storage.url,
                    "findings": [f.to_json() for f in findings],
                    "repaired": [f.to_json() for f in repaired],
                    "remaining": len(remaining),
                },
                indent=1,
            )
        )
    else:
        for finding in findings:
            done = " -> repaired" if finding in repaired else ""
            print(finding.line() + done)
        print(
            f"{len(findings)} problem(s) found, {len(repaired)} repaired, "
            f"{len(remaining)} remaining in {storage.url}"
        )
    return 1 if remaining else 0
