"""Pure parts of the consumer-group CLI tools: option parsing and table layout."""

from __future__ import annotations

import argparse

import pytest

from lakelog.cli import build_parser
from lakelog.cli.console_consumer import consumer_options
from lakelog.cli.consumer_groups import offset_rows, parse_topics, reset_target, table
from lakelog.client.admin import GroupDescription
from lakelog.client.structs import TopicPartition
from lakelog.errors import InvalidConfigError, InvalidRequestError


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["consumer-groups", *argv])


def test_topics_with_partitions() -> None:
    assert parse_topics(["a", "b:0,2", "b:1", "c:3"]) == {"a": None, "b": [0, 1, 2], "c": [3]}
    assert parse_topics(["a", "a:1"]) == {"a": None}
    assert parse_topics(None) == {}
    for bad in (":1", "a:x", "a:", "a:-1"):
        with pytest.raises(InvalidRequestError, match="--topic"):
            parse_topics([bad])


def test_reset_scenarios() -> None:
    base = ["--reset-offsets", "--group", "g", "--topic", "t"]
    assert reset_target(parse(*base, "--to-earliest")) == {"earliest": True}
    assert reset_target(parse(*base, "--shift-by", "-2")) == {"shift_by": -2}
    assert reset_target(parse(*base, "--to-offset", "0")) == {"offset": 0}
    assert reset_target(parse(*base, "--by-duration", "PT1H")) == {"duration": "PT1H"}
    assert reset_target(parse(*base, "--to-datetime", "2026-01-01T00:00:00.000")) == {
        "datetime": "2026-01-01T00:00:00.000"
    }
    with pytest.raises(InvalidRequestError, match="needs one of"):
        reset_target(parse(*base))
    with pytest.raises(SystemExit):  # two scenarios at once are refused by argparse
        parse(*base, "--to-earliest", "--to-latest")
    with pytest.raises(SystemExit):
        parse("--list", "--describe")


def test_table_and_describe_rows() -> None:
    assert table(["A", "LONG"], [[1, None], ["xyz", ""]]).splitlines() == [
        "A    LONG",
        "1    -",
        "xyz  -",
    ]
    described = GroupDescription.from_json(
        {
            "group_id": "g",
            "state": "Stable",
            "members": [
                {
                    "member_id": "m1",
                    "client_id": "c",
                    "host": "/1.2.3.4",
                    "assignment": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}],
                }
            ],
            "offsets": [
                {"topic": "t", "partition": 0, "offset": 5, "log_end_offset": 7, "lag": 2},
                {"topic": "u", "partition": 0, "offset": 1, "log_end_offset": 1, "lag": 0},
            ],
        }
    )
    assert described.members[0].assignment == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert offset_rows(described) == [
        ["g", "t", 0, 5, 7, 2, "m1", "/1.2.3.4", "c"],
        ["g", "t", 1, None, None, None, "m1", "/1.2.3.4", "c"],
        ["g", "u", 0, 1, 1, 0, None, None, None],
    ]


def test_console_consumer_properties() -> None:
    assert consumer_options(
        [
            "session.timeout.ms=6000,enable.auto.commit=false",
            "partition.assignment.strategy=range,sticky",
        ]
    ) == {
        "session_timeout_ms": 6000,
        "enable_auto_commit": False,
        "partition_assignment_strategy": ("range", "sticky"),
    }
    with pytest.raises(InvalidConfigError, match="not supported"):
        consumer_options(["bootstrap.servers=x"])
    with pytest.raises(InvalidConfigError, match="must be a number"):
        consumer_options(["session.timeout.ms=soon"])
    with pytest.raises(InvalidConfigError, match="true or false"):
        consumer_options(["enable.auto.commit=maybe"])
