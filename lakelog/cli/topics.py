"""``lakelog topics``: Kafka's kafka-topics.sh over a storage root."""

from __future__ import annotations

import argparse

from lakelog.catalog import Catalog, TopicDescription
from lakelog.cli.common import add_root, parse_key_values
from lakelog.errors import InvalidRequestError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    add_root(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true", help=f"{name} topics")
    parser.add_argument("--topic", help="topic name")
    parser.add_argument("--partitions", type=int, help="partition count (create, alter)")
    parser.add_argument("--replication-factor", type=int, help="accepted for compatibility")
    parser.add_argument("--config", action="append", help="name=value (create)")
    parser.add_argument("--add-config", action="append", help="name=value (alter)")
    parser.add_argument("--delete-config", action="append", help="name (alter)")
    parser.add_argument("--if-not-exists", action="store_true")
    parser.set_defaults(run=run)


def _need_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise InvalidRequestError("--topic is required for this action")
    return str(args.topic)


def run(args: argparse.Namespace) -> int:
    catalog = Catalog(args.root)
    try:
        if args.list:
            for name in catalog.list_topics():
                print(name)
        elif args.create:
            name = _need_topic(args)
            if args.if_not_exists and name in catalog.list_topics():
                return 0
            catalog.create_topic(
                name,
                args.partitions or 1,
                parse_key_values(args.config, "--config"),
                replication_factor=args.replication_factor,
            )
            print(f"Created topic {name}.")
        elif args.describe:
            names = [args.topic] if args.topic else catalog.list_topics()
            for name in names:
                print(format_description(catalog.describe_topic(name)))
        elif args.alter:
            name = _need_topic(args)
            if args.partitions:
                catalog.create_partitions(name, args.partitions)
            if args.add_config or args.delete_config:
                catalog.alter_topic_configs(
                    name,
                    parse_key_values(args.add_config, "--add-config"),
                    [c for item in args.delete_config or [] for c in item.split(",")],
                )
            print(f"Altered topic {name}.")
        elif args.delete:
            catalog.delete_topic(_need_topic(args))
            print(f"Deleted topic {args.topic}.")
    finally:
        catalog.close()
    return 0


def format_description(d: TopicDescription) -> str:
    overrides = ",".join(f"{k}={v}" for k, v in sorted(d.config.overrides.items()))
    lines = [
        f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {d.num_partitions}\t"
        f"Size: {d.size_bytes}\tConfigs: {overrides}\tTable: {d.table_uri}"
    ]
    for p in d.partitions:
        lines.append(
            f"\tTopic: {d.name}\tPartition: {p.partition}\tLogStartOffset: {p.log_start_offset}\t"
            f"HighWatermark: {p.high_watermark}\tSegments: {p.num_segments}\tSize: {p.size_bytes}"
        )
    return "\n".join(lines)
