"""Options shared by the CLI tools."""

from __future__ import annotations

import argparse
import os

from lakelog.errors import InvalidConfigError

DEFAULT_ROOT = os.environ.get("LAKELOG_ROOT", "./data/lakelog")
DEFAULT_BOOTSTRAP = os.environ.get("LAKELOG_BOOTSTRAP_SERVER", "http://127.0.0.1:8082")


def add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        default=None,
        help="storage root URL: a path, file://, s3://bucket/prefix or hdfs:// "
        "(default: $LAKELOG_ROOT or ./data/lakelog)",
    )


def add_bootstrap(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=None if not required else DEFAULT_BOOTSTRAP,
        help="broker URL(s), comma separated (default: $LAKELOG_BOOTSTRAP_SERVER or "
        "http://127.0.0.1:8082); host:port without a scheme means http",
    )


def bootstrap_urls(value: str | None) -> list[str]:
    """Kafka tools take host:port; brokers speak HTTP, so a missing scheme means http://."""
    raw = value or DEFAULT_BOOTSTRAP
    urls = []
    for item in raw.split(","):
        item = item.strip().rstrip("/")
        if not item:
            continue
        urls.append(item if "://" in item else f"http://{item}")
    if not urls:
        raise InvalidConfigError("--bootstrap-server names no broker")
    return urls


def parse_key_values(items: list[str] | None, what: str) -> dict[str, str]:
    """``k=v`` pairs (repeatable or comma separated, as Kafka's tools accept them)."""
    result: dict[str, str] = {}
    for item in items or []:
        for pair in _split_pairs(item):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise InvalidConfigError(f"{what} {pair!r} is not of the form name=value")
            result[key.strip()] = value.strip()
    return result


def _split_pairs(item: str) -> list[str]:
    # "cleanup.policy=compact,delete" must stay one pair: split on commas that start a new k=v.
    pairs: list[str] = []
    for piece in item.split(","):
        if "=" in piece or not pairs:
            pairs.append(piece)
        else:
            pairs[-1] += "," + piece
    return pairs
