"""``lakelog console-consumer``: kafka-console-consumer.sh over the HTTP brokers.

Prints values (and, with ``--property print.key=true`` etc., keys, offsets,
partitions, timestamps) of every partition of a topic, or of one partition
from ``--offset``. Starts at the end unless ``--from-beginning``; stops after
``--max-messages`` or after ``--timeout-ms`` without a new record.

With ``--group G`` it is a member of consumer group G, as Kafka's is: the
group assigns it partitions, it starts from the group's committed offsets
(``--from-beginning`` only sets ``auto.offset.reset=earliest`` for partitions
without one) and commits automatically and on exit. SIGTERM and Ctrl-C exit
cleanly, so the group rebalances at once instead of after the session timeout.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType
from typing import Any

from lakelog.cli.common import add_bootstrap, bootstrap_urls, parse_key_values
from lakelog.client import AdminClient, Consumer, TopicPartition
from lakelog.errors import InvalidConfigError, InvalidRequestError
from lakelog.numerals import is_unsigned_int
from lakelog.records import TIMESTAMP_TYPE_NAMES, ConsumerRecord


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("console-consumer", help="print the records of a topic")
    add_bootstrap(parser, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--from-beginning", action="store_true")
    parser.add_argument("--partition", type=int)
    parser.add_argument("--offset", help="a number, earliest or latest (needs --partition)")
    parser.add_argument("--max-messages", type=int)
    parser.add_argument("--timeout-ms", type=int, help="exit after this long without records")
    parser.add_argument("--property", action="append", help="print.key=true, key.separator=:")
    parser.add_argument("--group", help="consume as a member of this consumer group")
    parser.add_argument(
        "--consumer-property",
        action="append",
        help="consumer configs with Kafka's names, e.g. session.timeout.ms=6000",
    )
    parser.set_defaults(run=run)


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


class Formatter:
    """Kafka's DefaultMessageFormatter: optional fields before the value, tab separated."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return props.get(name, "false").lower() == "true"

        self.timestamp = flag("print.timestamp")
        self.partition = flag("print.partition")
        self.offset = flag("print.offset")
        self.headers = flag("print.headers")
        self.key = flag("print.key")
        self.value = props.get("print.value", "true").lower() == "true"
        self.separator = props.get("key.separator", "\t")

    def format(self, r: ConsumerRecord) -> str:
        parts = []
        if self.timestamp:
            parts.append(
                f"{TIMESTAMP_TYPE_NAMES.get(r.timestamp_type, 'NoTimestampType')}:{r.timestamp_ms}"
            )
        if self.partition:
            parts.append(f"Partition:{r.partition}")
        if self.offset:
            parts.append(f"Offset:{r.offset}")
        if self.headers:
            parts.append(
                ",".join(f"{k}:{_text(v)}" for k, v in r.headers) if r.headers else "NO_HEADERS"
            )
        if self.key:
            parts.append(_text(r.key))
        if self.value:
            parts.append(_text(r.value))
        return self.separator.join(parts)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        raise InvalidRequestError("--offset needs --partition")
    if args.offset is not None and args.from_beginning:
        raise InvalidRequestError("--offset and --from-beginning cannot be used together")
    if args.group is not None and args.partition is not None:
        raise InvalidRequestError("--group and --partition cannot be used together")
    formatter = Formatter(parse_key_values(args.property, "--property"))
    options = consumer_options(args.consumer_property)
    options.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    urls = bootstrap_urls(args.bootstrap_server)
    consumed = 0
    _exit_on_sigterm()
    if args.group is not None:
        consumer = Consumer(urls, group_id=args.group, **options)
        consumer.subscribe([args.topic])
    else:
        consumer = Consumer(urls, **options)
    try:
        if args.group is None:
            _assign(consumer, urls, args)
        idle_since = time.monotonic()
        while args.max_messages is None or consumed < args.max_messages:
            # Never poll more than will be printed: the rest would be committed unseen.
            limit = None if args.max_messages is None else args.max_messages - consumed
            batch = consumer.poll(timeout_ms=500, max_records=limit)
            records = sorted(
                (r for rs in batch.values() for r in rs), key=lambda r: (r.partition, r.offset)
            )
            for record in records:
                print(formatter.format(record), flush=True)
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
        consumer.close()
        print(f"Processed a total of {consumed} messages", file=sys.stderr, flush=True)
    return 0


def _assign(consumer: Consumer, urls: list[str], args: argparse.Namespace) -> None:
    if args.partition is not None:
        partitions = [args.partition]
    else:
        with AdminClient(urls) as admin:
            partitions = sorted(admin.topic_offsets(args.topic))
    tps = [TopicPartition(args.topic, p) for p in partitions]
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
