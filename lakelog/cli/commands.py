"""The built-in sub-commands: each one's module and the line ``lakelog --help`` shows.

A command's module is imported only when that command runs (or its own ``--help``
is asked for), so ``lakelog --version`` and ``lakelog --help`` load no client,
Arrow or Delta code.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "topics": Command("lakelog.cli.topics", "create, list, describe, alter and delete topics"),
    "console-producer": Command("lakelog.cli.console_producer", "produce stdin lines to a topic"),
    "console-consumer": Command("lakelog.cli.console_consumer", "print the records of a topic"),
    "consumer-groups": Command(
        "lakelog.cli.consumer_groups", "list, describe, delete and reset groups"
    ),
    "get-offsets": Command("lakelog.cli.get_offsets", "earliest, latest or by-time offsets"),
    "demo": Command("lakelog.cli.demo", "create a topic, append records, read them back"),
    "acls": Command("lakelog.cli.acls", "add, remove and list ACLs (kafka-acls.sh)"),
    "client-quotas": Command(
        "lakelog.cli.client_quotas", "set and show client quotas (kafka-configs)"
    ),
    "doctor": Command(
        "lakelog.cli.doctor", "check a storage root's invariants; --repair fixes what is safe"
    ),
}
