"""``lakelog console-consumer``: kafka-console-consumer.sh over the HTTP brokers.

Prints values (and, with ``--property print.key=true`` etc., keys, offsets,
partitions, timestamps) of every partition of a topic, or of one partition
from ``--offset``. Starts at the end unless ``--from-beginning``; stops after
``--max-messages`` or after ``--timeout-ms`` without a new record.
"""

from __future__ import annotations

import argparse
import sys
import time

from lakelog.cli.common import add_bootstrap, bootstrap_urls, parse_key_values
from lakelog.client import AdminClient, Consumer, TopicPartition
from lakelog.errors import InvalidRequestError
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
    parser.set_defaults(run=run)


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
    formatter = Formatter(parse_key_values(args.property, "--property"))
    urls = bootstrap_urls(args.bootstrap_server)
    if args.partition is not None:
        partitions = [args.partition]
    else:
        with AdminClient(urls) as admin:
            partitions = sorted(admin.topic_offsets(args.topic))
    tps = [TopicPartition(args.topic, p) for p in partitions]
    consumed = 0
    consumer = Consumer(urls, auto_offset_reset="earliest" if args.from_beginning else "latest")
    try:
        consumer.assign(tps)
        if args.offset is not None:
            _seek(consumer, tps[0], args.offset)
        elif args.from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        idle_since = time.monotonic()
        while args.max_messages is None or consumed < args.max_messages:
            batch = consumer.poll(timeout_ms=500)
            records = sorted(
                (r for rs in batch.values() for r in rs), key=lambda r: (r.partition, r.offset)
            )
            for record in records:
                print(formatter.format(record), flush=True)
                consumed += 1
                if args.max_messages is not None and consumed >= args.max_messages:
                    break
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
        print(f"Processed a total of {consumed} messages", file=sys.stderr)
    return 0


def _seek(consumer: Consumer, tp: TopicPartition, offset: str) -> None:
    text = offset.strip().lower()
    if text == "earliest":
        consumer.seek_to_beginning(tp)
    elif text == "latest":
        consumer.seek_to_end(tp)
    elif text.isdigit():
        consumer.seek(tp, int(text))
    else:
        raise InvalidRequestError(f"--offset must be a number, earliest or latest; got {offset!r}")
