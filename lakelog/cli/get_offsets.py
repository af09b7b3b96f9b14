"""``lakelog get-offsets``: kafka-get-offsets.sh — ``topic:partition:offset`` per line."""

from __future__ import annotations

import argparse

from lakelog.cli.common import add_bootstrap, bootstrap_urls
from lakelog.client import AdminClient, TopicPartition
from lakelog.errors import InvalidRequestError
from lakelog.numerals import is_unsigned_int


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("get-offsets", help="earliest, latest or by-time offsets")
    add_bootstrap(parser, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    parser.add_argument(
        "--time", default="-1", help="-1/latest (default), -2/earliest, or a timestamp in ms"
    )
    parser.set_defaults(run=run)


def parse_time(value: str) -> str | int:
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


def run(args: argparse.Namespace) -> int:
    spec = parse_time(args.time)
    with AdminClient(bootstrap_urls(args.bootstrap_server)) as admin:
        if args.partitions:
            try:
                partitions = [int(p) for p in args.partitions.split(",") if p.strip()]
            except ValueError:
                raise InvalidRequestError(
                    f"--partitions {args.partitions!r} is not a list of ids"
                ) from None
        else:
            partitions = sorted(admin.topic_offsets(args.topic))
        found = admin.list_offsets({TopicPartition(args.topic, p): spec for p in partitions})  # type: ignore[misc]
        for tp in sorted(found, key=lambda t: t.partition):
            print(f"{tp.topic}:{tp.partition}:{found[tp].offset}")
    return 0
