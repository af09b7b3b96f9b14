"""Kafka's consumer-group tutorial with real processes: brokers, console consumers, the CLI.

Two ``lakelog console-consumer --group A`` subprocesses split a 3-partition
topic, one stops and the other takes over; group B replays from the beginning
once, then nothing, then again after ``--reset-offsets --to-earliest``, and two
per partition after ``--shift-by -2``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from lakelog.client import AdminClient, Producer
from tests.fixtures.brokers import BrokerProcess, root_env
from tests.fixtures.roots import RootSpec

GROUP_BROKER = {
    "group_min_session_timeout_ms": 500,
    "group_initial_rebalance_delay_ms": 0,
    "group_tick_ms": 50,
}
FAST_PROPERTIES = [
    "session.timeout.ms=2000",
    "heartbeat.interval.ms=200",
    "auto.commit.interval.ms=300",
]
GUARD_S = 90


def lakelog(
    env: dict[str, str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def consumer_args(server: str, topic: str, group: str, *extra: str) -> list[str]:
    args = ["console-consumer", "--bootstrap-server", server, "--topic", topic, "--group", group]
    for prop in FAST_PROPERTIES:
        args += ["--consumer-property", prop]
    return args + list(extra)


class ConsoleConsumer:
    """A running ``lakelog console-consumer`` whose printed lines are collected by a thread."""

    def __init__(self, env: dict[str, str], args: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lakelog.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self._lines.append(line.rstrip("\n"))

    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    def stop(self) -> str:
        """SIGTERM, as an operator stopping it; returns stderr after a clean exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=GUARD_S)
        assert self.process.returncode == 0, err
        return err

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=GUARD_S)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Hang guard only: nothing here asserts speed."""
    deadline = time.monotonic() + GUARD_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.1)


def produce(server: str, topic: str, values: list[str], partitions: int) -> None:
    with Producer(server) as producer:
        for i, value in enumerate(values):
            producer.send(topic, value.encode(), partition=i % partitions)


def owned(server: str, group: str) -> list[int]:
    """Partitions owned per member of ``group`` (empty list while it has no members)."""
    with AdminClient(server) as admin:
        return sorted(len(m.assignment) for m in admin.describe_group(group).members)


def committed(server: str, group: str) -> dict[int, int]:
    with AdminClient(server) as admin:
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_kafka_consumer_group_tutorial(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    env = root_env(root)
    server = broker.url
    lakelog(
        env,
        "topics",
        "--create",
        "--topic",
        "tut",
        "--partitions",
        "3",
        "--bootstrap-server",
        server,
    )

    # Two console consumers in group A split the three partitions.
    first = ConsoleConsumer(env, consumer_args(server, "tut", "A"))
    second = ConsoleConsumer(env, consumer_args(server, "tut", "A"))
    try:
        wait_for(lambda: owned(server, "A") == [1, 2], "group A to split 3 partitions over 2")
        # auto-commit of the starting positions shows both resolved them (latest = 0)
        wait_for(lambda: committed(server, "A") == {0: 0, 1: 0, 2: 0}, "positions of A")
        described = lakelog(
            env, "consumer-groups", "--bootstrap-server", server, "--describe", "--group", "A"
        ).stdout
        header, *rows = described.strip().splitlines()
        assert header.split() == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
        assert len(rows) == 3 and len({r.split()[6] for r in rows}) == 2
        # resetting a group with active members is refused, as in Kafka
        refused = lakelog(
            env,
            "consumer-groups",
            "--bootstrap-server",
            server,
            "--reset-offsets",
            "--group",
            "A",
            "--topic",
            "tut",
            "--to-earliest",
            "--execute",
            check=False,
        )
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr

        produce(server, "tut", [f"m{i}" for i in range(30)], 3)
        wait_for(lambda: len(first.lines()) + len(second.lines()) >= 30, "30 records in A")
        assert first.lines() and second.lines(), "records were not spread over both consumers"
        assert sorted(first.lines() + second.lines()) == sorted(f"m{i}" for i in range(30))

        # Stopping one moves its partitions to the other.
        assert "Processed a total of" in second.stop()
        wait_for(lambda: owned(server, "A") == [3], "the remaining consumer to own 3 partitions")
        before = len(first.lines())
        produce(server, "tut", [f"n{i}" for i in range(9)], 3)
        wait_for(lambda: len(first.lines()) >= before + 9, "9 more records in the survivor")
        assert sorted(first.lines()[before:]) == sorted(f"n{i}" for i in range(9))
    finally:
        first.stop()
        second.stop()

    everything = sorted([f"m{i}" for i in range(30)] + [f"n{i}" for i in range(9)])

    def run_b() -> list[str]:
        done = lakelog(
            env, *consumer_args(server, "tut", "B", "--from-beginning", "--timeout-ms", "3000")
        )
        return sorted(done.stdout.splitlines())

    assert run_b() == everything  # group B replays everything ...
    assert run_b() == []  # ... and, its offsets committed, nothing the second time
    listed = lakelog(env, "consumer-groups", "--bootstrap-server", server, "--list").stdout
    assert set(listed.split()) == {"A", "B"}

    reset = [
        "consumer-groups",
        "--bootstrap-server",
        server,
        "--reset-offsets",
        "--group",
        "B",
        "--topic",
        "tut",
    ]
    plan = lakelog(env, *reset, "--to-earliest").stdout  # dry run: shows, changes nothing
    assert [line.split()[-1] for line in plan.strip().splitlines()[1:]] == ["0", "0", "0"]
    assert committed(server, "B") == {0: 13, 1: 13, 2: 13}
    lakelog(env, *reset, "--to-earliest", "--execute")
    assert run_b() == everything

    lakelog(env, *reset, "--shift-by", "-2", "--execute")
    assert committed(server, "B") == {0: 11, 1: 11, 2: 11}
    assert run_b() == sorted(["n3", "n6", "n4", "n7", "n5", "n8"])

    # --delete removes the group's offsets (it has no members any more)
    lakelog(env, "consumer-groups", "--bootstrap-server", server, "--delete", "--group", "B")
    listed = lakelog(env, "consumer-groups", "--bootstrap-server", server, "--list").stdout
    assert listed.split() == ["A"]
    gone = lakelog(
        env,
        "consumer-groups",
        "--bootstrap-server",
        server,
        "--describe",
        "--group",
        "B",
        check=False,
    )
    assert gone.returncode == 1 and "Consumer group 'B' does not exist." in gone.stderr
