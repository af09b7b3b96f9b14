"""Kafka's quickstart, as an operator would type it, against a real broker process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from lakelog.partitioner import partition_for_key
from tests.fixtures.brokers import PROJECT, BrokerProcess, root_env
from tests.fixtures.roots import RootSpec

VENV_BIN = Path(sys.executable).parent


def lakelog(
    env: dict[str, str], *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_quickstart(root: RootSpec, start_broker: Callable[..., BrokerProcess]) -> None:
    broker = start_broker(root)
    env = root_env(root)
    server = broker.url
    lakelog(
        env,
        "topics",
        "--create",
        "--topic",
        "quickstart-events",
        "--partitions",
        "3",
        "--bootstrap-server",
        server,
    )
    assert (
        "quickstart-events" in lakelog(env, "topics", "--list", "--bootstrap-server", server).stdout
    )
    described = lakelog(
        env, "topics", "--describe", "--topic", "quickstart-events", "--bootstrap-server", server
    ).stdout
    assert "PartitionCount: 3" in described

    lines = [f"event number {i}" for i in range(5)]
    lakelog(
        env,
        "console-producer",
        "--topic",
        "quickstart-events",
        "--bootstrap-server",
        server,
        "--partition",
        "1",
        "--producer-property",
        "acks=all",
        stdin="\n".join(lines) + "\n",
    )
    keyed = ["user-7:first", "user-9:second", "user-7:third"]
    lakelog(
        env,
        "console-producer",
        "--topic",
        "quickstart-events",
        "--bootstrap-server",
        server,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin="\n".join(keyed) + "\n",
    )

    consumed = lakelog(
        env,
        "console-consumer",
        "--topic",
        "quickstart-events",
        "--partition",
        "1",
        "--offset",
        "earliest",
        "--max-messages",
        "5",
        "--bootstrap-server",
        server,
    ).stdout.splitlines()
    assert consumed == lines  # in order

    everything = lakelog(
        env,
        "console-consumer",
        "--topic",
        "quickstart-events",
        "--from-beginning",
        "--timeout-ms",
        "1500",
        "--property",
        "print.key=true",
        "--property",
        "print.partition=true",
        "--bootstrap-server",
        server,
    )
    rows = [line.split("\t") for line in everything.stdout.splitlines()]
    assert "Processed a total of 8 messages" in everything.stderr
    for key, value in (k.split(":") for k in keyed):
        expected = f"Partition:{partition_for_key(key.encode(), 3)}"
        assert [expected, key, value] in rows
    sevens = [r[2] for r in rows if r[1] == "user-7"]
    assert sevens == ["first", "third"]  # per-key order kept

    offsets = lakelog(
        env, "get-offsets", "--topic", "quickstart-events", "--bootstrap-server", server
    ).stdout.splitlines()
    latest = {int(line.split(":")[1]): int(line.split(":")[2]) for line in offsets}
    assert sum(latest.values()) == 8 and latest[1] >= 5

    failed = lakelog(
        env,
        "console-producer",
        "--topic",
        "no-such-topic",
        "--bootstrap-server",
        server,
        stdin="x\n",
        check=False,
    )
    assert failed.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in failed.stderr
    bad = lakelog(
        env, "topics", "--create", "--topic", "../x", "--bootstrap-server", server, check=False
    )
    assert bad.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in bad.stderr


def readme_quickstart() -> str:
    """The README's shell quickstart: the block after "With the broker running"."""
    text = (PROJECT / "README.md").read_text()
    match = re.search(
        r"With the broker\s+running, from another shell:\s+```bash\n(.*?)```", text, re.DOTALL
    )
    assert match is not None
    return match.group(1)


def readme_kafka_quickstart() -> str:
    """The README's Kafka client snippet: the Python block that names localhost:9092."""
    text = (PROJECT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    found: list[str] = [block for block in blocks if "localhost:9092" in block]
    assert len(found) == 1, "the README has one Kafka client snippet"
    return found[0]


def test_readme_quickstart_shows_the_records_it_produced(
    tmp_path: Path, start_broker: Callable[..., BrokerProcess]
) -> None:
    """The README's commands, as written, against a fresh broker (its port for 8082)."""
    broker = start_broker(RootSpec(str(tmp_path / "root")))
    script = readme_quickstart()
    assert "localhost:8082" in script
    address = broker.url.removeprefix("http://")
    script = script.replace("localhost:8082", address).replace(".venv/bin/", f"{VENV_BIN}/")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    created, produced, *fetched = (json.loads(line) for line in lines[:5])
    assert created["name"] == "quickstart-events"
    where = {r["partition"] for r in produced["records"]}
    assert partition_for_key(b"user-1", 3) in where
    assert [f["partition"] for f in fetched] == [0, 1, 2]
    records = [(f["partition"], r["key"], r["value"]) for f in fetched for r in f["records"]]
    assert {(key, value) for _, key, value in records} == {("user-1", "hello"), (None, "world")}
    assert {p for p, _, _ in records} == where  # each where the produce answer said
    consumed = {tuple(line.split("\t")) for line in lines[5:]}
    assert {row[1:] for row in consumed} == {("user-1", "hello"), ("null", "world")}
    assert "Processed a total of 2 messages" in done.stderr

    # The Kafka client snippet that follows, against the same broker's Kafka listener.
    assert broker.kafka is not None
    snippet = readme_kafka_quickstart().replace("localhost:9092", broker.kafka)
    done = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = {tuple(line.split(" ", 2)[2:]) for line in done.stdout.splitlines()}
    assert printed == {
        ("b'user-1' b'hello'",),
        ("None b'world'",),
        ("b'user-1' b'This is my first event'",),
    }, done.stdout
