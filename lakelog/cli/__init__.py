"""The ``lakelog`` command: one sub-command per operator tool, mirroring Kafka's scripts."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from lakelog.cli import (
    acls,
    client_quotas,
    console_consumer,
    console_producer,
    consumer_groups,
    demo,
    doctor,
    get_offsets,
    topics,
)
from lakelog.cli.common import client_security
from lakelog.errors import LakelogError

#: Entry-point group through which server/, compaction/ and spark_connector/
#: add their commands without the core importing them.
COMMANDS_GROUP = "lakelog.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakelog", description="Kafka's log model on Delta Lake tables."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (topics, console_producer, console_consumer, consumer_groups, get_offsets, demo):
        module.register(sub)
    for module in (acls, client_quotas, doctor):
        module.register(sub)
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        entry.load()(sub)
    return parser


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed sub-command; a lakelog error becomes a message and exit code 1."""
    try:
        with client_security(args):
            code: int = args.run(args)
    except LakelogError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return code


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
