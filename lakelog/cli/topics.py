"""``lakelog topics``: Kafka's kafka-topics.sh, over a broker or directly on a storage root.

Through a broker's admin API, as Kafka's tool, unless ``--root`` names a
storage root to edit directly. ``--topic`` is a regular expression for
``--list`` and ``--describe`` (Kafka's reading), one name otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from lakelog.cli.cluster import admin_client
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import (
    SubParsers,
    add_tool,
    matching_topics,
    parse_key_values,
    select_topics,
    split_names,
    topic_pattern,
)
from lakelog.client.admin import AdminClient
from lakelog.client.admin import TopicDescription as RemoteDescription
from lakelog.errors import InvalidRequestError

if TYPE_CHECKING:  # the Delta layer loads only with --root
    from lakelog.catalog import Catalog, TopicDescription


def register(sub: SubParsers) -> None:
    actions = {a: f"{a} topics" for a in ("create", "list", "describe", "alter", "delete")}
    parser = add_tool(sub, "topics", COMMANDS["topics"].help, run, actions, root=True)
    parser.add_argument(
        "--topic",
        help="topic name; with --list and --describe a regular expression matching whole "
        "names, commas separating alternatives (default: every topic)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        help="partition count (--create, default 1; --alter: the new total, never fewer)",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        help="accepted for compatibility: durability comes from the storage, not replicas",
    )
    parser.add_argument(
        "--config",
        action="append",
        help="--create: name=value, repeatable or comma separated; list values as "
        "name=[v1,v2] (default: the broker's defaults)",
    )
    parser.add_argument(
        "--add-config",
        action="append",
        help="--alter: name=value to set, repeatable or comma separated; list values as "
        "name=[v1,v2]",
    )
    parser.add_argument(
        "--delete-config", action="append", help="--alter: name of an override to remove"
    )
    parser.add_argument(
        "--if-not-exists",
        action="store_true",
        help="--create: do nothing if the topic exists (instead of TOPIC_ALREADY_EXISTS)",
    )


def _need_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise InvalidRequestError("--topic is required for this action")
    return str(args.topic)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap_server and args.root:
        raise InvalidRequestError("give either --bootstrap-server or --root, not both")
    if args.root:
        from lakelog.catalog import Catalog

        with contextlib.closing(Catalog(args.root)) as catalog:
            return _run(args, catalog)
    with admin_client(args) as client:
        return _run(args, client)


def _run(args: argparse.Namespace, admin: Catalog | AdminClient) -> int:
    if args.list:
        names = admin.list_topics()
        for name in select_topics(names, topic_pattern(args.topic)) if args.topic else names:
            print(name)
    elif args.create:
        name = _need_topic(args)
        if args.if_not_exists and name in admin.list_topics():
            return 0
        configs = parse_key_values(args.config, "--config")
        admin.create_topic(name, args.partitions or 1, configs, args.replication_factor)
        print(f"Created topic {name}.")
    elif args.describe:
        names = admin.list_topics()
        for name in matching_topics(names, args.topic) if args.topic else names:
            print(format_description(admin.describe_topic(name)))
    elif args.alter:
        name = _need_topic(args)
        if args.partitions:
            admin.create_partitions(name, args.partitions)
        if args.add_config or args.delete_config:
            configs = parse_key_values(args.add_config, "--add-config")
            delete = split_names(args.delete_config)
            if isinstance(admin, AdminClient):
                admin.alter_configs(name, set=configs, delete=delete)
            else:
                admin.alter_topic_configs(name, configs, delete)
        print(f"Altered topic {name}.")
    elif args.delete:
        admin.delete_topic(_need_topic(args))
        print(f"Deleted topic {args.topic}.")
    return 0


def format_description(d: TopicDescription | RemoteDescription) -> str:
    """Kafka's --describe lines, Kafka's columns first (a partition's one replica is its
    leader, always in sync; ``none`` where no broker answers), then lakelog's."""
    if isinstance(d, RemoteDescription):
        configs, leader, leaders = d.overrides(), d.commit_leader, d.kafka_leaders
    else:
        configs, leader, leaders = dict(d.config.overrides), None, None
    overrides = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    lines = [
        f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
        f"ReplicationFactor: 1\tConfigs: {overrides}\tSize: {d.size_bytes}\t"
        f"Table: {d.table_uri}" + (f"\tCommitLeader: {leader}" if leader else "")
    ]
    for i, p in enumerate(d.partitions):
        node = str(leaders[i]) if leaders is not None and i < len(leaders) else None
        replicas = (
            f"Leader: {node}\tReplicas: {node}\tIsr: {node}"
            if node is not None
            else "Leader: none\tReplicas: \tIsr: "
        )
        lines.append(
            f"\tTopic: {d.name}\tPartition: {p.partition}\t{replicas}\tElr: \tLastKnownElr: \t"
            f"LogStartOffset: {p.log_start_offset}\tHighWatermark: {p.high_watermark}\t"
            f"Segments: {p.num_segments}\tSize: {p.size_bytes}"
        )
    return "\n".join(lines)
