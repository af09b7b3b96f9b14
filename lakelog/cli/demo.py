"""``lakelog demo``: the smallest end-to-end run of the log on a local root, no broker."""

from __future__ import annotations

import argparse
import time

from lakelog.catalog import Catalog
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import add_root, storage_root
from lakelog.cli.topics import format_description
from lakelog.records import Record


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("demo", help=COMMANDS["demo"].help)
    add_root(parser)
    parser.add_argument(
        "--topic", default="quickstart-events", help="topic to use (default: quickstart-events)"
    )
    parser.add_argument(
        "--records", type=int, default=10_000, help="records to append (default: 10000)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    catalog = Catalog(storage_root(args))
    if args.topic not in catalog.list_topics():
        catalog.create_topic(args.topic, 3)
        print(f"Created topic {args.topic} with 3 partitions in {catalog.url}")
    log = catalog.topic(args.topic)
    started = time.perf_counter()
    batch = [
        Record(f"event {i}: hello from lakelog".encode(), key=f"user-{i % 7}".encode())
        for i in range(args.records)
    ]
    result = log.append(batch)
    elapsed = time.perf_counter() - started
    print(
        f"Appended {args.records} records in one Delta commit (version {result.version}) "
        f"in {elapsed * 1000:.0f} ms"
    )
    for b in sorted(result.batches, key=lambda b: b.partition):
        print(f"  partition {b.partition}: {b.count} records at offsets {b.base_offset}..")
    first = result.batches[0]
    fetched = log.read(first.partition, first.base_offset, max_records=3)
    print(f"Read back from partition {first.partition}, offset {first.base_offset}:")
    for r in fetched.to_records(args.topic):
        print(f"  offset={r.offset} key={r.key!r} value={r.value!r}")
    print(format_description(catalog.describe_topic(args.topic)))
    catalog.close()
    return 0
