"""A tool piped into ``head -1`` stops quietly when head exits, as Unix tools do.

Each tool writes more than a pipe holds (64 KiB), so it is certainly still
writing when ``head`` has printed its line and closed the pipe: the write
fails with EPIPE, and the tool must end without a traceback. A short output
into a pipe whose reader is already gone fails only when stdout is flushed at
exit, which must not end in a traceback either.
A console consumer in a group commits only what it wrote before the pipe
closed, so the records it could not print are read again next time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from lakelog.client import AdminClient, Producer
from tests.cli.tool import tool_env
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration  # each test runs the lakelog CLI as a process

#: Exit statuses of a tool stopped by a closed pipe: 141 (128 + SIGPIPE) as a shell shows a
#: process SIGPIPE ended, or 0.
QUIET_EXIT = (0, 141)


def into_head(*args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """``python -m lakelog.cli ARGS | head -1``: the tool's result and what head printed."""
    tool = subprocess.Popen(
        [sys.executable, "-m", "lakelog.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=tool_env(),
        text=True,
    )
    assert tool.stdout is not None and tool.stderr is not None
    head = subprocess.run(
        ["head", "-1"], stdin=tool.stdout, capture_output=True, text=True, timeout=180
    )
    tool.stdout.close()  # head held the only other read end: the pipe is closed now
    stderr = tool.stderr.read()
    code = tool.wait(timeout=180)
    return subprocess.CompletedProcess(tool.args, code, "", stderr), head.stdout


def into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m lakelog.cli ARGS`` writing into a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "lakelog.cli", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            env=tool_env(),
            text=True,
            timeout=180,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [["--version"], ["topics", "--help"]], ids=" ".join)
def test_short_output_into_a_closed_pipe(args: list[str]) -> None:
    done = into_closed_pipe(*args)
    assert done.returncode in QUIET_EXIT and done.stderr == ""


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_tools_piped_into_head_stop_quietly(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(
        root, group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500
    )
    with AdminClient(broker.url) as admin:
        admin.create_topic("wide", partitions=1500)  # --describe prints ~120 KiB
        admin.create_topic("busy", partitions=3)
    with Producer(broker.url, linger_ms=50) as producer:
        for i in range(6000):  # ~600 KiB of values
            producer.send("busy", f"{i:06d} {'x' * 90}", key=str(i % 40))
        producer.flush()

    done, first = into_head("topics", "--bootstrap-server", broker.url, "--describe")
    assert first.startswith("Topic: ")
    assert done.returncode in QUIET_EXIT and done.stderr == ""
    done = into_closed_pipe("topics", "--bootstrap-server", broker.url, "--list")
    assert done.returncode in QUIET_EXIT and done.stderr == ""

    done, first = into_head(
        "console-consumer",
        "--bootstrap-server",
        broker.url,
        "--topic",
        "busy",
        "--from-beginning",
        "--max-messages",
        "6000",
    )
    assert len(first) == 98
    assert done.returncode in QUIET_EXIT
    assert done.stderr.startswith("Processed a total of "), done.stderr
    assert done.stderr.count("\n") == 1  # that line and nothing else

    done, first = into_head(
        "console-consumer",
        "--bootstrap-server",
        broker.url,
        "--topic",
        "busy",
        "--group",
        "piped",
        "--from-beginning",
        "--consumer-property",
        "session.timeout.ms=2000",
        "--consumer-property",
        "heartbeat.interval.ms=200",
    )
    assert len(first) == 98
    assert done.returncode in QUIET_EXIT
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Processed a total of "), done.stderr
    printed = int(lines[0].split()[4])
    assert 0 < printed < 6000
    with AdminClient(broker.url) as admin:
        committed = admin.list_group_offsets("piped")
    assert sum(om.offset for om in committed.values()) == printed
