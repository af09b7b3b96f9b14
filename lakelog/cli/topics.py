"""``lakelog topics``: Kafka's kafka-topics.sh, over a broker or directly on a storage root.

By default it goes through a broker's admin API, as Kafka's tool does
(``--bootstrap-server``, else ``$LAKELOG_BOOTSTRAP_SERVER``, else the local
broker); only ``--root`` makes it edit a storage root directly, without a
broker. ``--topic`` is a regular expression for ``--list`` and ``--describe``
(Kafka's reading); ``--create``, ``--alter`` and ``--delete`` take one name.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Protocol

from lakelog.catalog import Catalog, TopicDescription
from lakelog.cli.cluster import admin_client
from lakelog.cli.common import (
    add_bootstrap,
    add_root,
    parse_key_values,
    select_topics,
    topic_pattern,
)
from lakelog.client.admin import AdminClient
from lakelog.client.admin import TopicDescription as RemoteDescription
from lakelog.errors import InvalidRequestError, UnknownTopicOrPartitionError


@dataclass(frozen=True)
class PartitionLine:
    partition: int
    log_start_offset: int
    high_watermark: int
    num_segments: int
    size_bytes: int


@dataclass(frozen=True)
class DescribedTopic:
    """What --describe prints, whichever way the topic was reached."""

    name: str
    topic_id: str
    table_uri: str
    size_bytes: int
    overrides: dict[str, str]
    partitions: list[PartitionLine]
    #: Known only through a broker: storage alone does not say which broker commits.
    commit_leader: str | None = None

    @classmethod
    def local(cls, d: TopicDescription) -> DescribedTopic:
        return cls(
            d.name,
            d.topic_id,
            d.table_uri,
            d.size_bytes,
            dict(d.config.overrides),
            [
                PartitionLine(
                    p.partition, p.log_start_offset, p.high_watermark, p.num_segments, p.size_bytes
                )
                for p in d.partitions
            ],
        )

    @classmethod
    def remote(cls, d: RemoteDescription) -> DescribedTopic:
        return cls(
            d.name,
            d.topic_id,
            d.table_uri,
            d.size_bytes,
            d.overrides(),
            [
                PartitionLine(
                    p.partition, p.log_start_offset, p.high_watermark, p.num_segments, p.size_bytes
                )
                for p in d.partitions
            ],
            d.commit_leader,
        )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("topics", help="create, list, describe, alter and delete topics")
    add_bootstrap(parser)
    add_root(parser, instead_of_broker=True)
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true", help=f"{name} topics")
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
    parser.set_defaults(run=run)


def _need_topic(args: argparse.Namespace) -> str:
    if not args.topic:
        raise InvalidRequestError("--topic is required for this action")
    return str(args.topic)


class _Admin(Protocol):
    """What the tool needs, implemented over a broker or directly over a root."""

    def list_topics(self) -> list[str]: ...
    def create(
        self, name: str, partitions: int, configs: dict[str, str], rf: int | None
    ) -> None: ...
    def describe(self, name: str) -> DescribedTopic: ...
    def add_partitions(self, name: str, count: int) -> None: ...
    def alter(self, name: str, set_configs: dict[str, str], delete: list[str]) -> None: ...
    def delete(self, name: str) -> None: ...


class _RootAdmin:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def list_topics(self) -> list[str]:
        return self.catalog.list_topics()

    def create(self, name: str, partitions: int, configs: dict[str, str], rf: int | None) -> None:
        self.catalog.create_topic(name, partitions, configs, replication_factor=rf)

    def describe(self, name: str) -> DescribedTopic:
        return DescribedTopic.local(self.catalog.describe_topic(name))

    def add_partitions(self, name: str, count: int) -> None:
        self.catalog.create_partitions(name, count)

    def alter(self, name: str, set_configs: dict[str, str], delete: list[str]) -> None:
        self.catalog.alter_topic_configs(name, set_configs, delete)

    def delete(self, name: str) -> None:
        self.catalog.delete_topic(name)


class _BrokerAdmin:
    def __init__(self, client: AdminClient) -> None:
        self.client = client

    def list_topics(self) -> list[str]:
        return self.client.list_topics()

    def create(self, name: str, partitions: int, configs: dict[str, str], rf: int | None) -> None:
        self.client.create_topic(name, partitions, configs, replication_factor=rf)

    def describe(self, name: str) -> DescribedTopic:
        return DescribedTopic.remote(self.client.describe_topic(name))

    def add_partitions(self, name: str, count: int) -> None:
        self.client.create_partitions(name, count)

    def alter(self, name: str, set_configs: dict[str, str], delete: list[str]) -> None:
        self.client.alter_configs(name, set=set_configs, delete=delete)

    def delete(self, name: str) -> None:
        self.client.delete_topic(name)


def run(args: argparse.Namespace) -> int:
    if args.bootstrap_server and args.root:
        raise InvalidRequestError("give either --bootstrap-server or --root, not both")
    if args.root:
        catalog = Catalog(args.root)
        try:
            return _run(args, _RootAdmin(catalog))
        finally:
            catalog.close()
    with admin_client(args) as client:
        return _run(args, _BrokerAdmin(client))


def _selected(args: argparse.Namespace, admin: _Admin) -> list[str]:
    """The topics --list/--describe show: all, or those --topic matches in full."""
    names = admin.list_topics()
    return names if not args.topic else select_topics(names, topic_pattern(args.topic))


def _run(args: argparse.Namespace, admin: _Admin) -> int:
    if args.list:
        for name in _selected(args, admin):
            print(name)
    elif args.create:
        name = _need_topic(args)
        if args.if_not_exists and name in admin.list_topics():
            return 0
        configs = parse_key_values(args.config, "--config")
        admin.create(name, args.partitions or 1, configs, args.replication_factor)
        print(f"Created topic {name}.")
    elif args.describe:
        names = _selected(args, admin)
        if args.topic and not names:
            raise UnknownTopicOrPartitionError(f"no topic matches --topic {args.topic!r}")
        for name in names:
            print(format_description(admin.describe(name)))
    elif args.alter:
        name = _need_topic(args)
        if args.partitions:
            admin.add_partitions(name, args.partitions)
        if args.add_config or args.delete_config:
            configs = parse_key_values(args.add_config, "--add-config")
            admin.alter(name, configs, _names(args.delete_config))
        print(f"Altered topic {name}.")
    elif args.delete:
        admin.delete(_need_topic(args))
        print(f"Deleted topic {args.topic}.")
    return 0


def _names(items: list[str] | None) -> list[str]:
    return [c.strip() for item in items or [] for c in item.split(",") if c.strip()]


def format_description(d: DescribedTopic | TopicDescription) -> str:
    if isinstance(d, TopicDescription):
        d = DescribedTopic.local(d)
    overrides = ",".join(f"{k}={v}" for k, v in sorted(d.overrides.items()))
    lines = [
        f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
        f"Size: {d.size_bytes}\tConfigs: {overrides}\tTable: {d.table_uri}"
        + (f"\tCommitLeader: {d.commit_leader}" if d.commit_leader else "")
    ]
    for p in d.partitions:
        lines.append(
            f"\tTopic: {d.name}\tPartition: {p.partition}\tLogStartOffset: {p.log_start_offset}\t"
            f"HighWatermark: {p.high_watermark}\tSegments: {p.num_segments}\tSize: {p.size_bytes}"
        )
    return "\n".join(lines)
