"""``lakelog console-consumer``: kafka-console-consumer.sh over the HTTP brokers.

With ``--group G`` it is a member of group G, as Kafka's is: it starts from
the committed offsets (``--from-beginning`` only sets
``auto.offset.reset=earliest``) and commits on exit. SIGTERM, Ctrl-C and a
closed standard output (``| head``) exit cleanly, so the group rebalances at
once instead of after the session timeout; what was not printed is not committed.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from lakelog.cli.cluster import admin_over, build_client, client_settings, connect, partitions
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import (
    SubParsers,
    add_tool,
    matching_topics,
    parse_key_values,
    topic_pattern,
)
from lakelog.client import AdminClient, Consumer, TopicPartition
from lakelog.errors import InvalidConfigError, InvalidRequestError
from lakelog.numerals import is_unsigned_int
from lakelog.records import ConsumerRecord, timestamp_type_name


def register(sub: SubParsers) -> None:
    parser = add_tool(sub, "console-consumer", COMMANDS["console-consumer"].help, run)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", help="the topic to consume")
    source.add_argument(
        "--include",
        metavar="REGEX",
        help="consume every topic whose whole name this regular expression matches "
        "(commas separate alternatives); with --group, topics created later join too",
    )
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (default: only new records); with --group, only "
        "partitions without a committed offset",
    )
    parser.add_argument(
        "--partition", type=int, help="consume only this partition of --topic (default: all)"
    )
    parser.add_argument("--offset", help="a number, earliest or latest (needs --partition)")
    parser.add_argument(
        "--max-messages", type=int, help="exit after printing this many (default: no limit)"
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        help="exit after this long without records (default: wait for ever)",
    )
    parser.add_argument(
        "--property",
        action="append",
        help="formatter settings: print.key, print.partition, print.offset, "
        "print.timestamp, print.headers, print.value=true/false, key.separator",
    )
    parser.add_argument(
        "--group", help="consume as a member of this consumer group (default: no group)"
    )
    parser.add_argument(
        "--consumer-property",
        action="append",
        help="consumer configs with Kafka's names, e.g. session.timeout.ms=6000",
    )


#: --consumer-property names accepted, and how their values are read.
CONSUMER_PROPERTIES: dict[str, type] = {
    "client.id": str,
    "group.instance.id": str,
    "session.timeout.ms": int,
    "heartbeat.interval.ms": int,
    "max.poll.interval.ms": int,
    "enable.auto.commit": bool,
    "auto.commit.interval.ms": int,
    "auto.offset.reset": str,
    "partition.assignment.strategy": list,
    "metadata.max.age.ms": int,
    "fetch.max.wait.ms": int,
    "max.poll.records": int,
    "request.timeout.ms": int,
}


def consumer_options(items: list[str] | None) -> dict[str, Any]:
    """Consumer keyword arguments from Kafka-named ``k=v`` properties; unknown names refused."""
    out: dict[str, Any] = {}
    for name, text in parse_key_values(items, "--consumer-property").items():
        kind = CONSUMER_PROPERTIES.get(name)
        if kind is None:
            raise InvalidConfigError(
                f"--consumer-property {name!r} is not supported; known: "
                + ", ".join(sorted(CONSUMER_PROPERTIES))
            )
        key = name.replace(".", "_")
        if kind is int:
            if not is_unsigned_int(text.strip()):
                raise InvalidConfigError(f"--consumer-property {name} must be a number: {text!r}")
            out[key] = int(text)
        elif kind is bool:
            if text.lower() not in ("true", "false"):
                raise InvalidConfigError(f"--consumer-property {name} must be true or false")
            out[key] = text.lower() == "true"
        elif kind is list:
            out[key] = tuple(p.strip() for p in text.split(",") if p.strip())
        else:
            out[key] = text
    return out


def _exit_on_sigterm() -> None:
    """SIGTERM ends the loop like Ctrl-C, so ``close`` commits and leaves the group."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


#: The fields Kafka's DefaultMessageFormatter can print, in its order: property -> field.
FIELDS: dict[str, Callable[[ConsumerRecord], str]] = {
    "print.timestamp": lambda r: f"{timestamp_type_name(r.timestamp_type)}:{r.timestamp_ms}",
    "print.partition": lambda r: f"Partition:{r.partition}",
    "print.offset": lambda r: f"Offset:{r.offset}",
    "print.headers": lambda r: (
        ",".join(f"{k}:{_text(v)}" for k, v in r.headers) if r.headers else "NO_HEADERS"
    ),
    "print.key": lambda r: _text(r.key),
    "print.value": lambda r: _text(r.value),
}


class Formatter:
    """Kafka's DefaultMessageFormatter: the ``print.*`` fields chosen (only the value by
    default), separated by ``key.separator``."""

    def __init__(self, props: dict[str, str]) -> None:
        self.fields = [
            field
            for name, field in FIELDS.items()
            if props.get(name, "true" if name == "print.value" else "false").lower() == "true"
        ]
        self.separator = props.get("key.separator", "\t")

    def format(self, r: ConsumerRecord) -> str:
        return self.separator.join(field(r) for field in self.fields)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        raise InvalidRequestError("--offset needs --partition")
    if args.offset is not None and args.from_beginning:
        raise InvalidRequestError("--offset and --from-beginning cannot be used together")
    if args.partition is not None and args.topic is None:
        raise InvalidRequestError("--partition needs --topic")
    if args.group is not None and args.partition is not None:
        raise InvalidRequestError("--group and --partition cannot be used together")
    formatter = Formatter(parse_key_values(args.property, "--property"))
    pattern = None if args.include is None else topic_pattern(args.include, "--include")
    options = consumer_options(args.consumer_property)
    options.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    settings = client_settings(args)
    options.setdefault("request_timeout_ms", settings.request_timeout_ms)
    options.setdefault("default_api_timeout_ms", settings.default_api_timeout_ms)
    _exit_on_sigterm()
    with connect(settings) as connection:
        consumer = build_client(
            lambda: Consumer(
                settings.bootstrap, group_id=args.group, connection=connection, **options
            ),
            "--consumer-property",
        )
        try:
            if args.group is None:
                with admin_over(settings, connection) as admin:
                    _assign(consumer, admin, args)
            elif pattern is not None:
                consumer.subscribe(pattern=pattern)
            else:
                consumer.subscribe([args.topic])
            return _consume(consumer, formatter, args)
        finally:
            consumer.close()


def _consume(consumer: Consumer, formatter: Formatter, args: argparse.Namespace) -> int:
    consumed = 0
    try:
        idle_since = time.monotonic()
        while args.max_messages is None or consumed < args.max_messages:
            # Never poll more than will be printed: the rest would be committed unseen.
            limit = None if args.max_messages is None else args.max_messages - consumed
            batch = consumer.poll(timeout_ms=500, max_records=limit)
            records = sorted(
                (r for rs in batch.values() for r in rs),
                key=lambda r: (r.topic, r.partition, r.offset),
            )
            for i, record in enumerate(records):
                try:
                    print(formatter.format(record), flush=True)
                except BrokenPipeError:
                    _rewind(consumer, records[i:])  # commit only what was printed
                    raise
                consumed += 1
            if records:
                idle_since = time.monotonic()
            elif (
                args.timeout_ms is not None
                and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms
            ):
                break
    except KeyboardInterrupt:
        pass
    finally:
        print(f"Processed a total of {consumed} messages", file=sys.stderr, flush=True)
    return 0


def _rewind(consumer: Consumer, unprinted: list[ConsumerRecord]) -> None:
    """Move each partition back to its first record that was polled but not printed."""
    first: dict[TopicPartition, int] = {}
    for record in unprinted:
        first.setdefault(TopicPartition(record.topic, record.partition), record.offset)
    for tp, offset in first.items():
        consumer.seek(tp, offset)


def _assign(consumer: Consumer, admin: AdminClient, args: argparse.Namespace) -> None:
    if args.include is not None:
        # internal topics ("_" prefix) are left out, as a group's pattern subscription does
        names = [n for n in admin.list_topics() if not n.startswith("_")]
        topics = matching_topics(names, args.include, "--include")
    else:
        topics = [args.topic]
    if args.partition is not None:
        tps = [TopicPartition(args.topic, args.partition)]
    else:
        tps = partitions(admin, topics)
    consumer.assign(tps)
    if args.offset is not None:
        _seek(consumer, tps[0], args.offset)
    elif args.from_beginning:
        consumer.seek_to_beginning(*tps)
    else:
        consumer.seek_to_end(*tps)


def _seek(consumer: Consumer, tp: TopicPartition, offset: str) -> None:
    text = offset.strip().lower()
    if text == "earliest":
        consumer.seek_to_beginning(tp)
    elif text == "latest":
        consumer.seek_to_end(tp)
    elif is_unsigned_int(text):
        consumer.seek(tp, int(text))
    else:
        raise InvalidRequestError(f"--offset must be a number, earliest or latest; got {offset!r}")
