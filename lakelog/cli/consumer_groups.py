"""``lakelog consumer-groups``: kafka-consumer-groups.sh over the brokers' group API.

Resets are planned by the broker, so the CLI and the HTTP admin API give the
same answer; as in Kafka a reset is a dry run unless ``--execute`` is given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from lakelog.cli.cluster import admin_client
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import SubParsers, add_switches, add_tool
from lakelog.client.admin import AdminClient, GroupDescription, OffsetReset
from lakelog.client.structs import TopicPartition
from lakelog.errors import GroupIdNotFoundError, InvalidRequestError

#: --reset-offsets scenarios: flag -> (its key in the request's ``to``, metavar (None for a
#: switch; N takes a number), help)
SCENARIOS: dict[str, tuple[str, str | None, str]] = {
    "to-earliest": ("earliest", None, "to the log start offset"),
    "to-latest": ("latest", None, "to the log end offset"),
    "to-current": ("current", None, "to the committed offset, clamped into the log"),
    "to-offset": ("offset", "N", "to offset N, clamped"),
    "shift-by": ("shift_by", "N", "committed offset plus N (negative moves back), clamped"),
    "to-datetime": (
        "datetime",
        "YYYY-MM-DDTHH:mm:SS.sss",
        "to the first offset at or after this time (UTC unless an offset such as +02:00 is given)",
    ),
    "by-duration": (
        "duration",
        "PnDTnHnMnS",
        "to the first offset at or after now minus this ISO-8601 duration",
    ),
}


def register(sub: SubParsers) -> None:
    actions = {
        "list": "list every group",
        "describe": "offsets and lag of groups",
        "delete": "delete groups' committed offsets",
        "reset-offsets": "move committed offsets",
    }
    parser = add_tool(sub, "consumer-groups", COMMANDS["consumer-groups"].help, run, actions)
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--group", action="append", help="a group id (repeatable)")
    target.add_argument("--all-groups", action="store_true", help="every group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument(
        "--offsets",
        action="store_true",
        help="--describe: committed offsets, log end offsets and lag per partition (the default)",
    )
    view.add_argument("--members", action="store_true", help="--describe: the members")
    view.add_argument("--state", action="store_true", help="--describe: state and coordinator")
    parser.add_argument("--verbose", action="store_true", help="--members: with assignments")
    parser.add_argument(
        "--topic", action="append", help="--reset-offsets: T or T:p1,p2 (repeatable)"
    )
    parser.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic")
    scenario = parser.add_mutually_exclusive_group()
    for flag, (_, metavar, text) in SCENARIOS.items():
        text = f"--reset-offsets: {text}"
        if metavar is None:
            scenario.add_argument(f"--{flag}", action="store_true", help=text)
        else:
            kind = int if metavar == "N" else str
            scenario.add_argument(f"--{flag}", type=kind, metavar=metavar, help=text)
    add_switches(
        parser.add_mutually_exclusive_group(),
        {"dry-run": "show the plan (the default)", "execute": "apply the plan"},
    )


def run(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        if args.list:
            for listing in sorted(admin.list_groups(), key=lambda g: g.group_id):
                print(listing.group_id)
            return 0
        groups = _groups(args, admin)
        if args.describe:
            for i, group in enumerate(groups):
                described = admin.describe_group(group)
                if described.state == "Dead":  # no members, offsets nor generation
                    raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
                if i:
                    print()
                print(describe(described, args))
        elif args.delete:
            for group in groups:
                admin.delete_group(group)
                print(f"Deletion of requested consumer groups ('{group}') was successful.")
        else:
            to = reset_target(args)
            topics = parse_topics(args.topic)
            if not topics and not args.all_topics:
                raise InvalidRequestError("--reset-offsets needs --topic or --all-topics")
            rows: list[tuple[str, OffsetReset]] = []
            for group in groups:
                planned = admin.reset_group_offsets(
                    group, to, topics=topics, all_topics=args.all_topics, execute=args.execute
                )
                rows += [(group, r) for r in planned]
            print(format_reset(rows))
            if not args.execute:
                print(
                    "Dry run: no offsets were changed. Run the same command with --execute "
                    "to apply this plan.",
                    file=sys.stderr,
                )
    return 0


def _groups(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    if args.all_groups:
        return sorted(g.group_id for g in admin.list_groups())
    if not args.group:
        raise InvalidRequestError("--group or --all-groups is required with this action")
    return list(args.group)


def parse_topics(items: Sequence[str] | None) -> dict[str, list[int] | None]:
    """``T`` (all partitions) or ``T:0,2`` per item, as kafka-consumer-groups.sh takes them."""
    out: dict[str, list[int] | None] = {}
    for item in items or []:
        name, sep, rest = item.partition(":")
        if not name:
            raise InvalidRequestError(f"--topic {item!r} names no topic")
        if not sep:
            out[name] = None
            continue
        try:
            partitions = [int(p) for p in rest.split(",") if p.strip()]
        except ValueError:
            raise InvalidRequestError(
                f"--topic {item!r}: partitions must be comma-separated numbers"
            ) from None
        if not partitions or any(p < 0 for p in partitions):
            raise InvalidRequestError(f"--topic {item!r}: give partitions as T:0,1,2")
        if name in out and out[name] is None:
            continue  # already all partitions
        out[name] = sorted({*(out.get(name) or []), *partitions})
    return out


def reset_target(args: argparse.Namespace) -> dict[str, Any]:
    chosen = [
        (getattr(args, flag.replace("-", "_")), key) for flag, (key, _, _) in SCENARIOS.items()
    ]
    # ``is``, not ``in``: --to-offset 0 and --shift-by 0 are choices too (0 == False)
    chosen = [(value, key) for value, key in chosen if value is not None and value is not False]
    if not chosen:
        flags = ", ".join(f"--{flag}" for flag in SCENARIOS)
        raise InvalidRequestError(f"--reset-offsets needs one of {flags}")
    value, key = chosen[0]
    return {key: value}


def _cell(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns two spaces apart, like Kafka's tools print them."""
    cells = [list(header)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def describe(d: GroupDescription, args: argparse.Namespace) -> str:
    lines: list[str] = []
    if not d.members:
        lines.append(f"Consumer group '{d.group_id}' has no active members.\n")
    if args.state:
        coordinator = (
            "-" if d.coordinator is None else f"{d.coordinator.url} ({d.coordinator.broker_id})"
        )
        lines.append(
            table(
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [[d.group_id, coordinator, d.protocol, d.state, len(d.members)]],
            )
        )
    elif args.members:
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        if args.verbose:
            header.append("ASSIGNMENT")
        rows: list[list[object]] = []
        for m in d.members:
            row: list[object] = [d.group_id, m.member_id, m.host, m.client_id, len(m.assignment)]
            if args.verbose:
                row.append(",".join(f"{tp.topic}({tp.partition})" for tp in m.assignment))
            rows.append(row)
        lines.append(table(header, rows))
    else:
        lines.append(table(DESCRIBE_HEADER, offset_rows(d)))
    return "\n".join(lines)


DESCRIBE_HEADER = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]


def offset_rows(d: GroupDescription) -> list[list[object]]:
    """One row per partition with a committed offset or an owner (Kafka shows both kinds)."""
    owners = {tp: m for m in d.members for tp in m.assignment}
    committed = {TopicPartition(o.topic, o.partition): o for o in d.offsets}
    rows: list[list[object]] = []
    for tp in sorted(owners.keys() | committed.keys()):
        o, owner = committed.get(tp), owners.get(tp)
        log: list[object] = [None] * 3 if o is None else [o.offset, o.log_end_offset, o.lag]
        member: list[object] = [None if o is None else o.member_id, None, None]
        if owner is not None:
            member = [owner.member_id, owner.host, owner.client_id]
        rows.append([d.group_id, tp.topic, tp.partition, *log, *member])
    return rows


def format_reset(rows: Sequence[tuple[str, OffsetReset]]) -> str:
    return table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [
            [g, r.topic, r.partition, r.new_offset]
            for g, r in sorted(rows, key=lambda x: (x[0], x[1].topic, x[1].partition))
        ],
    )
