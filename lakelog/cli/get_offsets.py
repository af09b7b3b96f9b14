"""``lakelog get-offsets``: kafka-get-offsets.sh — ``topic:partition:offset`` per line."""

from __future__ import annotations

import argparse

from lakelog.cli.cluster import admin_client, partitions
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import SubParsers, add_tool, matching_topics
from lakelog.client.offsets import OffsetSpec
from lakelog.errors import InvalidRequestError, UnknownTopicOrPartitionError
from lakelog.numerals import is_unsigned_int


def register(sub: SubParsers) -> None:
    parser = add_tool(sub, "get-offsets", COMMANDS["get-offsets"].help, run)
    parser.add_argument(
        "--topic",
        help="regular expression matching whole topic names, commas separating "
        "alternatives (default: every topic)",
    )
    parser.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    parser.add_argument(
        "--time", default="-1", help="-1/latest (default), -2/earliest, or a timestamp in ms"
    )


def parse_time(value: str) -> OffsetSpec:
    text = value.strip().lower()
    if text in ("-1", "latest"):
        return "latest"
    if text in ("-2", "earliest"):
        return "earliest"
    if is_unsigned_int(text):
        return int(text)
    raise InvalidRequestError(
        f"--time must be -1, -2, latest, earliest or a timestamp; got {value!r}"
    )


def parse_partitions(value: str | None) -> set[int] | None:
    if not value:
        return None
    try:
        return {int(p) for p in value.split(",") if p.strip()}
    except ValueError:
        raise InvalidRequestError(f"--partitions {value!r} is not a list of ids") from None


def run(args: argparse.Namespace) -> int:
    spec = parse_time(args.time)
    wanted = parse_partitions(args.partitions)
    with admin_client(args) as admin:
        topics = admin.list_topics()
        if args.topic:
            topics = matching_topics(topics, args.topic)
        tps = [tp for tp in partitions(admin, topics) if wanted is None or tp.partition in wanted]
        if wanted is not None and not tps:
            raise UnknownTopicOrPartitionError(
                f"no partition {args.partitions} in {', '.join(topics) or 'any topic'}"
            )
        found = admin.list_offsets(dict.fromkeys(tps, spec))
        for tp in tps:
            print(f"{tp.topic}:{tp.partition}:{found[tp].offset}")
    return 0
