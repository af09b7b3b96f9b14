"""``lakelog console-producer``: kafka-console-producer.sh over the HTTP brokers.

One record per stdin line, batched and sent while stdin is read. With
``--sync`` each is acknowledged before the next line is read and the first
failure stops the tool, so every line before the one named is stored, none after.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import Future
from typing import Any

from lakelog.cli.cluster import build_client, client_settings, connect
from lakelog.cli.commands import COMMANDS
from lakelog.cli.common import SubParsers, add_tool, parse_key_values
from lakelog.client import Producer, RecordMetadata
from lakelog.errors import InvalidConfigError, InvalidRecordError

#: Kafka producer property -> Producer keyword (with its type).
PRODUCER_PROPERTIES: dict[str, tuple[str, type]] = {
    "acks": ("acks", str),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_size", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "enable.idempotence": ("enable_idempotence", bool),
    "max.request.size": ("max_request_size", int),
    "buffer.memory": ("buffer_memory", int),
}


def register(sub: SubParsers) -> None:
    parser = add_tool(sub, "console-producer", COMMANDS["console-producer"].help, run)
    parser.add_argument("--topic", required=True, help="topic to produce to")
    parser.add_argument(
        "--property",
        action="append",
        help="line reader settings: parse.key=true splits each line at key.separator "
        "(default: a tab) into key and value",
    )
    parser.add_argument(
        "--producer-property",
        action="append",
        help="producer configs with Kafka's names, e.g. acks=all, linger.ms=5",
    )
    parser.add_argument(
        "--partition", type=int, help="send every record to this partition (default: by key)"
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="send each record synchronously: acknowledged before the next line is read; "
        "stop at the first failure",
    )


def producer_options(items: list[str] | None) -> dict[str, Any]:
    """Producer keyword arguments from Kafka-named ``--producer-property`` values."""
    options: dict[str, Any] = {}
    for name, raw in parse_key_values(items, "--producer-property").items():
        if name not in PRODUCER_PROPERTIES:
            raise InvalidConfigError(
                f"unsupported producer property {name!r}; supported: "
                f"{', '.join(sorted(PRODUCER_PROPERTIES))}"
            )
        keyword, kind = PRODUCER_PROPERTIES[name]
        try:
            if kind is bool:
                options[keyword] = raw.lower() == "true"
            else:
                options[keyword] = kind(raw)
        except ValueError:
            raise InvalidConfigError(
                f"producer property {name}={raw!r} is not a {kind.__name__}"
            ) from None
    return options


def split_line(line: str, parse_key: bool, separator: str) -> tuple[bytes | None, bytes]:
    if not parse_key:
        return None, line.encode()
    key, sep, value = line.partition(separator)
    if not sep:
        raise InvalidRecordError(f"no key separator {separator!r} found in line {line!r}")
    return key.encode(), value.encode()


def run(args: argparse.Namespace) -> int:
    props = parse_key_values(args.property, "--property")
    parse_key = props.get("parse.key", "false").lower() == "true"
    separator = props.get("key.separator", "\t")
    interactive = sys.stdin.isatty()
    failures = 0
    futures: list[Future[RecordMetadata]] = []
    settings = client_settings(args)
    options: dict[str, Any] = {"request_timeout_ms": settings.request_timeout_ms}
    options.update(producer_options(args.producer_property))
    with (
        connect(settings) as connection,
        build_client(
            lambda: Producer(settings.bootstrap, connection=connection, **options),
            "--producer-property",
        ) as producer,
    ):
        if interactive:
            print(">", end="", flush=True)
        for number, raw in enumerate(sys.stdin, 1):
            line = raw.rstrip("\n").rstrip("\r")
            try:
                key, value = split_line(line, parse_key, separator)
            except InvalidRecordError as exc:
                print(f"Error: {exc}", file=sys.stderr)
                failures += 1
                continue
            future = producer.send(args.topic, value, key=key, partition=args.partition)
            if args.sync:
                producer.flush(None)
                error = future.exception()
                if error is not None:
                    print(f"Error: line {number} was not stored: {error}", file=sys.stderr)
                    return 1
            else:
                futures.append(future)
            if interactive:
                print(">", end="", flush=True)
        producer.flush(None)
    for future in futures:
        error = future.exception()
        if error is not None:
            failures += 1
            print(f"Error: {error}", file=sys.stderr)
    return 1 if failures else 0
