"""Options shared by the CLI tools."""

from __future__ import annotations

import argparse
import os

from lakelog.errors import InvalidConfigError

DEFAULT_ROOT = os.environ.get("LAKELOG_ROOT", "./data/lakelog")


def add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        default=DEFAULT_ROOT,
        help="storage root URL: a path, file://, s3://bucket/prefix or hdfs:// "
        "(default: $LAKELOG_ROOT or ./data/lakelog)",
    )


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
