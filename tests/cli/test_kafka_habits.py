"""What a Kafka user types out of habit works as Kafka's tools do, against a real broker.

``--version``; ``--topic`` as a regular expression for ``topics --list`` and
``--describe`` and for ``get-offsets`` (which, without it, shows every topic);
bracketed list values in ``--config``/``--add-config``; ``console-producer
--sync``; ``console-consumer --include``; ``consumer-groups --describe
--offsets``; a ``--reset-offsets`` that says it is a dry run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import httpx
import pytest
from confluent_kafka import Consumer as KafkaConsumer
from kafka.admin import KafkaAdminClient as KafkaAdmin

from lakelog import __version__
from lakelog.cli import build_parser
from lakelog.cli.common import parse_key_values, select_topics, topic_pattern
from lakelog.client import AdminClient, Producer
from lakelog.errors import InvalidRequestError
from tests.cli.tool import lakelog, tool_env
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration  # each test runs the lakelog CLI as a process

GROUP_BROKER = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 500}
FAST_GROUP = ["--consumer-property", "session.timeout.ms=2000,heartbeat.interval.ms=200"]


def test_version() -> None:
    assert lakelog("--version").stdout.strip() == __version__
    assert lakelog("topics", "--version").stdout.strip() == __version__
    assert lakelog("broker", "start", "--version").stdout.strip() == __version__


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_kafka_habits_against_a_broker(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    env = tool_env(LAKELOG_BOOTSTRAP_SERVER=broker.url)

    def tool(*args: str, stdin: str | None = None, check: bool = True) -> tuple[int, str, str]:
        done = lakelog(*args, env=env, stdin=stdin, check=check)
        return done.returncode, done.stdout, done.stderr

    with AdminClient(broker.url) as admin:
        for name, partitions in (("quick.a", 2), ("quick.b", 1), ("quickly", 1), ("other", 1)):
            admin.create_topic(name, partitions)

    # --topic is a regex matching whole names (quick.* also matches "quickly", as in Kafka)
    _, listed, _ = tool("topics", "--list", "--topic", r"quick\..*")
    assert listed.split() == ["quick.a", "quick.b"]
    _, described, _ = tool("topics", "--describe", "--topic", "quick.*")
    assert [line.split("\t")[0] for line in described.splitlines() if line.startswith("Topic")] == [
        "Topic: quick.a",
        "Topic: quick.b",
        "Topic: quickly",
    ]
    code, _, error = tool("topics", "--describe", "--topic", "nothing.*", check=False)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in error and "nothing.*" in error

    # Kafka's bracket form for list values
    tool("topics", "--create", "--topic", "both", "--config", "cleanup.policy=[compact,delete]")
    tool("topics", "--alter", "--topic", "other", "--add-config", "retention.ms=60000")
    tool("topics", "--alter", "--topic", "other", "--add-config", "cleanup.policy=[delete,compact]")
    with AdminClient(broker.url) as admin:
        assert admin.describe_topic("both").overrides() == {"cleanup.policy": "compact,delete"}
        assert admin.describe_topic("other").overrides() == {
            "cleanup.policy": "compact,delete",  # the broker keeps a list in its own order
            "retention.ms": "60000",
        }

    # get-offsets: every topic without --topic, a regex with it
    _, offsets, _ = tool("get-offsets")
    rows = set(offsets.split())
    assert {"quick.a:0:0", "quick.a:1:0", "quick.b:0:0", "quickly:0:0", "other:0:0"} <= rows
    assert "both:0:0" in rows
    _, offsets, _ = tool("get-offsets", "--topic", r"quick\..*", "--partitions", "1")
    assert offsets.split() == ["quick.a:1:0"]

    # --sync: each line acknowledged before the next is read; the first failure stops it
    tool("topics", "--create", "--topic", "small", "--config", "max.message.bytes=64")
    lines = ["first", "second", "x" * 200, "after"]
    code, _, error = tool(
        "console-producer", "--topic", "small", "--sync", stdin="\n".join(lines) + "\n", check=False
    )
    assert code == 1 and "line 3 was not stored" in error and "MESSAGE_TOO_LARGE" in error
    _, consumed, _ = tool(
        "console-consumer", "--topic", "small", "--from-beginning", "--timeout-ms", "2000"
    )
    assert consumed.split() == ["first", "second"]

    # --include: every topic the regex matches, with and without a group
    with Producer(broker.url) as producer:
        producer.send("quick.a", "a0", partition=0)
        producer.send("quick.a", "a1", partition=1)
        producer.send("quick.b", "b0")
        producer.send("quickly", "not-included")
        producer.send("other", "not-included")
    common = ["--include", r"quick\.a,quick\.b", "--from-beginning"]
    _, consumed, _ = tool("console-consumer", *common, "--timeout-ms", "2000")
    assert sorted(consumed.split()) == ["a0", "a1", "b0"]
    _, consumed, _ = tool(
        "console-consumer",
        *common,
        "--group",
        "habits",
        *FAST_GROUP,
        "--max-messages",
        "3",
        "--timeout-ms",
        "60000",  # only ends the run if records are missing
    )
    assert sorted(consumed.split()) == ["a0", "a1", "b0"]

    # --describe --offsets is the default view, spelled out
    _, by_default, _ = tool("consumer-groups", "--describe", "--group", "habits")
    _, with_offsets, _ = tool("consumer-groups", "--describe", "--group", "habits", "--offsets")
    assert with_offsets == by_default
    assert "CURRENT-OFFSET" in with_offsets
    assert {line.split()[1] for line in with_offsets.splitlines()[3:]} == {"quick.a", "quick.b"}

    # a reset without --execute says it is a dry run, and changes nothing
    reset = ["consumer-groups", "--reset-offsets", "--group", "habits", "--all-topics"]
    _, plan, note = tool(*reset, "--to-earliest")
    assert "NEW-OFFSET" in plan
    assert "Dry run" in note and "--execute" in note
    with AdminClient(broker.url) as admin:
        assert sum(o.offset for o in admin.list_group_offsets("habits").values()) == 3
    _, _, note = tool(*reset, "--to-earliest", "--execute")
    assert "Dry run" not in note
    with AdminClient(broker.url) as admin:
        assert sum(o.offset for o in admin.list_group_offsets("habits").values()) == 0


def test_topic_patterns_match_whole_names() -> None:
    names = ["quick.a", "quick_b", "quickly", "a.quick.b"]
    assert select_topics(names, topic_pattern("quick.*")) == ["quick.a", "quick_b", "quickly"]
    assert select_topics(names, topic_pattern(r"quick\..*")) == ["quick.a"]
    assert select_topics(names, topic_pattern("quick.a")) == ["quick.a"]  # a name is itself
    assert select_topics(names, topic_pattern("quickly, quick_b")) == ["quick_b", "quickly"]
    with pytest.raises(InvalidRequestError, match="--include 'quick\\[' is not a valid"):
        topic_pattern("quick[", "--include")


def test_bracketed_list_values() -> None:
    assert parse_key_values(["cleanup.policy=[compact,delete]"], "--add-config") == {
        "cleanup.policy": "compact,delete"
    }
    assert parse_key_values(["a=1,b=[x,y=z],c=3"], "--config") == {"a": "1", "b": "x,y=z", "c": "3"}
    assert parse_key_values(["cleanup.policy=compact,delete"], "--config") == {
        "cleanup.policy": "compact,delete"
    }
    assert parse_key_values(["key.separator=,"], "--property") == {"key.separator": ","}
    assert parse_key_values(["key.separator=["], "--property") == {"key.separator": "["}


def every_option() -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(f"{name} {sub_name}".strip(), sub)
            elif action.option_strings:
                found.append((name, action))

    walk("", build_parser())
    return found


def test_every_option_has_help() -> None:
    missing = [
        f"{command} {'/'.join(action.option_strings)}"
        for command, action in every_option()
        if not (action.help or "").strip() or action.help == argparse.SUPPRESS
    ]
    assert missing == []


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_topics_describe_prints_kafkas_columns_first(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    assert broker.kafka is not None
    with AdminClient(broker.url) as admin:
        admin.create_topic("described", 2, {"retention.ms": "60000"})
    env = tool_env(LAKELOG_BOOTSTRAP_SERVER=broker.url)
    described = lakelog("topics", "--describe", "--topic", "described", env=env).stdout
    header, *partitions = described.strip().splitlines()
    kafka = KafkaAdmin(bootstrap_servers=broker.kafka)
    try:
        (metadata,) = kafka.describe_topics(["described"])
    finally:
        kafka.close()
    leaders = {p["partition_index"]: p["leader_id"] for p in metadata["partitions"]}
    fields = header.split("\t")
    assert [f.split(":")[0] for f in fields[:5]] == [
        "Topic",
        "TopicId",
        "PartitionCount",
        "ReplicationFactor",
        "Configs",
    ]
    assert fields[3] == "ReplicationFactor: 1" and fields[4] == "Configs: retention.ms=60000"
    for line in partitions:
        columns = line.strip().split("\t")
        partition = int(columns[1].removeprefix("Partition: "))
        leader = leaders[partition]
        assert columns[:7] == [
            "Topic: described",
            f"Partition: {partition}",
            f"Leader: {leader}",
            f"Replicas: {leader}",
            f"Isr: {leader}",
            "Elr: ",
            "LastKnownElr: ",
        ]
        assert columns[7].startswith("LogStartOffset: ")

    direct = lakelog("topics", "--root", root.url, "--describe", "--topic", "described")
    assert "\tLeader: none\tReplicas: \tIsr: \t" in direct.stdout  # no broker: no leader


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_consumer_groups_shows_the_partitions_of_kafka_protocol_members(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    assert broker.kafka is not None
    with AdminClient(broker.url) as admin:
        admin.create_topic("held", 3)
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": broker.kafka,
            "group.id": "kafka-members",
            "client.id": "habit-client",
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe(["held"])
        for _ in range(60):
            consumer.poll(0.5)
            if len(consumer.assignment()) == 3:
                break
        assert len(consumer.assignment()) == 3
        env = tool_env(LAKELOG_BOOTSTRAP_SERVER=broker.url)
        members = lakelog(
            "consumer-groups", "--describe", "--members", "--group", "kafka-members", env=env
        ).stdout
        (row,) = [line.split() for line in members.splitlines() if "habit-client" in line]
        assert row[0] == "kafka-members" and row[1] != "-" and row[-1] == "3"
        offsets = lakelog(
            "consumer-groups", "--describe", "--group", "kafka-members", env=env
        ).stdout
        owned = [line.split() for line in offsets.splitlines() if line.startswith("kafka-")]
        assert sorted(r[2] for r in owned) == ["0", "1", "2"]
        assert all(r[-1] == "habit-client" for r in owned)
    finally:
        consumer.close()


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_the_kafka_port_as_bootstrap_server(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    """``--bootstrap-server localhost:9092``, Kafka's habit, reaches the broker: its Kafka
    listener answers an HTTP request at once with the HTTP URL, which the tools then use."""
    broker = start_broker(root)
    assert broker.kafka is not None
    with AdminClient(broker.url) as admin:
        admin.create_topic("habits", 1)
    port = broker.kafka.rpartition(":")[2]
    done = lakelog("topics", "--bootstrap-server", f"localhost:{port}", "--list", env=tool_env())
    assert done.stdout.split() == ["habits"]
    assert f"using its HTTP API at http://localhost:{broker.port}" in done.stderr

    answer = httpx.get(f"http://{broker.kafka}/v1/topics", timeout=30)
    assert answer.status_code == 421
    assert answer.headers["X-Lakelog-Http-Url"] == broker.url
    assert answer.json()["error"] == "INVALID_REQUEST"
    assert broker.url in answer.json()["message"]
    # The listener still serves Kafka clients.
    topics = KafkaAdmin(bootstrap_servers=broker.kafka)
    try:
        assert "habits" in topics.list_topics()
    finally:
        topics.close()
