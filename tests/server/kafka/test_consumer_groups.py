"""Kafka consumer groups of three real member processes per client library.

Records keep arriving while three members share a 6-partition topic; one
member is SIGKILLed mid-stream, the other two take its partitions once its
session expires. Every acknowledged record is consumed at least once, the
group's committed offsets are what ``/v1/groups/{group}/offsets`` reads, and
a member started after the others have left resumes from those offsets.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from lakelog.testing.brokers import wait_for
from lakelog.testing.env import child_env
from tests.fixtures.brokers import PROJECT, BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, Message, kafka_client
from tests.server.kafka.test_produce_consume import create_topic

TOPIC = "stream"
PARTITIONS = 6


class Member:
    def __init__(self, client: str, bootstrap: str, group: str, workdir: Path, name: str) -> None:
        self.out = workdir / f"{name}.positions"
        self.stop_file = workdir / f"{name}.stop"
        self.log = (workdir / f"{name}.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.server.kafka.group_member",
                client,
                bootstrap,
                TOPIC,
                group,
                str(self.out),
                str(self.stop_file),
            ],
            cwd=PROJECT,
            env=child_env(PROJECT),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def positions(self) -> set[tuple[int, int]]:
        if not self.out.exists():
            return set()
        lines = self.out.read_text().splitlines()
        return {(int(p), int(o)) for p, o in (line.split() for line in lines if line.strip())}

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()
        self.log.close()


@contextmanager
def members(
    client: str, bootstrap: str, group: str, workdir: Path, names: list[str]
) -> Iterator[list[Member]]:
    started = [Member(client, bootstrap, group, workdir, name) for name in names]
    try:
        yield started
    finally:
        for member in started:
            if member.process.poll() is None:
                member.stop()


def produce(client: str, bootstrap: str, start: int, n: int) -> set[tuple[int, int]]:
    batch = [Message(b"user-%d" % (i % 50), b"event-%d" % i) for i in range(start, start + n)]
    return {(d.partition, d.offset) for d in kafka_client(client).produce(bootstrap, TOPIC, batch)}


def committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    response = httpx.get(f"{broker.url}/v1/groups/{group}/offsets", timeout=60)
    assert response.status_code == 200, response.text
    return {int(o["partition"]): int(o["offset"]) for o in response.json()["offsets"]}


@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_group_survives_a_killed_member_and_resumes_from_committed_offsets(
    client: str, root: RootSpec, start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = start_broker(root)
    assert broker.kafka is not None
    bootstrap = broker.kafka
    create_topic(broker, TOPIC, PARTITIONS)
    group = f"group-{client}"
    acked = produce(client, bootstrap, 0, 600)

    with members(client, bootstrap, group, tmp_path, ["m1", "m2", "m3"]) as (m1, m2, m3):

        def consumed() -> set[tuple[int, int]]:
            return m1.positions() | m2.positions() | m3.positions()

        wait_for(lambda: all(m.positions() for m in (m1, m2, m3)), "all three to consume", 120)
        acked |= produce(client, bootstrap, 600, 600)
        m1.kill()
        acked |= produce(client, bootstrap, 1200, 600)
        wait_for(
            lambda: acked <= consumed(),
            "every acknowledged record to be consumed after the kill",
            180,
        )
        m2.stop()
        m3.stop()

    offsets = committed(broker, group)
    ends: dict[int, int] = {}
    for partition, offset in acked:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    assert offsets == ends, "the group committed every partition's end"

    acked_later = produce(client, bootstrap, 1800, 60)
    with members(client, bootstrap, group, tmp_path, ["m4"]) as (m4,):
        wait_for(lambda: acked_later <= m4.positions(), "the new member to get new records", 120)
    assert m4.positions() == acked_later, "a restarted group resumes at its committed offsets"
