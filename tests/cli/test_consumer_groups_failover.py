"""A group member killed with SIGKILL: its partitions move after the session timeout and
consumption resumes from its last committed offsets (at-least-once, nothing skipped)."""

from __future__ import annotations

from collections.abc import Callable

from tests.cli.test_consumer_groups import (
    GROUP_BROKER,
    ConsoleConsumer,
    committed,
    consumer_args,
    owned,
    produce,
    wait_for,
)
from tests.client.conftest import create_topic
from tests.fixtures.brokers import BrokerProcess, root_env
from tests.fixtures.roots import RootSpec


def parse(lines: list[str]) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of lines printed with print.partition/print.offset."""
    out = []
    for line in lines:
        partition, offset, value = line.split("\t")
        out.append((int(partition.split(":")[1]), int(offset.split(":")[1]), value))
    return out


def test_sigkilled_member_resumes_from_committed_offsets(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, **GROUP_BROKER)
    env = root_env(root)
    server = broker.url
    create_topic(server, "events", 2)
    printing = ["--property", "print.partition=true", "--property", "print.offset=true"]
    # The victim commits rarely, so it has read past its last commit when it dies.
    victim = ConsoleConsumer(
        env,
        consumer_args(
            server,
            "events",
            "K",
            "--from-beginning",
            *printing,
            "--consumer-property",
            "auto.commit.interval.ms=4000",
        ),
    )
    survivor = ConsoleConsumer(
        env, consumer_args(server, "events", "K", "--from-beginning", *printing)
    )
    try:
        wait_for(lambda: owned(server, "K") == [1, 1], "one partition per member")
        produce(server, "events", [f"a{i}" for i in range(20)], 2)
        wait_for(lambda: len(victim.lines()) + len(survivor.lines()) >= 20, "the first 20")
        (victim_partition,) = {p for p, _, _ in parse(victim.lines())}
        wait_for(
            lambda: committed(server, "K").get(victim_partition) == 10,
            "the victim to commit its first batch",
        )
        produce(server, "events", [f"b{i}" for i in range(20)], 2)
        wait_for(
            lambda: sum(v.startswith("b") for _, _, v in parse(victim.lines())) == 10,
            "the victim to print its second batch",
        )
        victim.kill()  # SIGKILL: no commit, no leave
        at_death = committed(server, "K")[victim_partition]
        survivor_before = len(survivor.lines())
        wait_for(lambda: owned(server, "K") == [2], "the session timeout to move the partition")
        produce(server, "events", [f"c{i}" for i in range(20)], 2)
        wait_for(
            lambda: sum(v.startswith("c") for _, _, v in parse(survivor.lines())) == 20,
            "the survivor to read everything new",
        )
        taken = [
            (o, v) for p, o, v in parse(survivor.lines()[survivor_before:]) if p == victim_partition
        ]
        # It resumed exactly at the last committed offset: redelivery, nothing skipped.
        assert taken[0][0] == at_death
        assert [o for o, _ in taken] == list(range(at_death, 30))
        produced = {f"{k}{i}" for k in "abc" for i in range(20)}
        seen = {v for _, _, v in parse(victim.lines()) + parse(survivor.lines())}
        assert seen >= produced
        assert at_death < 20, "the victim had committed everything: nothing was redelivered"
    finally:
        victim.kill()
        survivor.stop()
