"""Where the tools go when no flag says: broker tools to a broker, root tools to a named root.

The rule: a tool that can talk to a broker does (``--bootstrap-server``, else
``$LAKELOG_BOOTSTRAP_SERVER``, else http://127.0.0.1:8082), and works directly
on a storage root only with ``--root``. A root-only tool takes ``--root`` or
``$LAKELOG_ROOT`` and refuses to run without one, rather than inventing
``./data/lakelog`` in whatever directory it was started from. Each tool runs
as a process from a directory of its own, so anything it invents there shows.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakelog.catalog import Catalog
from lakelog.cli import build_parser
from lakelog.cli.cluster import client_settings
from lakelog.cli.common import storage_root
from lakelog.client import AdminClient
from lakelog.errors import InvalidConfigError
from lakelog.testing.brokers import free_port
from tests.cli.tool import lakelog, tool_env
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration  # each test runs the lakelog CLI as a process


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """An empty directory to run the tools from: not the root, not the repository."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_topics_talks_to_the_broker_of_the_environment(
    root: RootSpec, start_broker: Callable[..., BrokerProcess], elsewhere: Path
) -> None:
    broker = start_broker(root)
    env = tool_env(LAKELOG_BOOTSTRAP_SERVER=broker.url)

    lakelog("topics", "--create", "--topic", "orders", "--partitions", "2", env=env, cwd=elsewhere)
    assert "orders" in lakelog("topics", "--list", env=env, cwd=elsewhere).stdout.split()
    described = lakelog("topics", "--describe", "--topic", "orders", env=env, cwd=elsewhere)
    assert "PartitionCount: 2" in described.stdout
    with AdminClient(broker.url) as admin:
        description = admin.describe_topic("orders")
        assert description.num_partitions == 2
        (only,) = admin.brokers().brokers
        assert description.commit_leader == only.broker_id  # a broker alone commits its topics
    assert f"CommitLeader: {only.broker_id}" in described.stdout
    assert list(elsewhere.iterdir()) == []  # no root invented where the tool ran

    # --root, and only --root, goes to the storage directly
    direct = lakelog("topics", "--root", root.url, "--list", env=env, cwd=elsewhere)
    assert "orders" in direct.stdout.split()
    both = lakelog(
        "topics", "--root", root.url, "--bootstrap-server", broker.url, "--list", check=False
    )
    assert both.returncode == 1 and "not both" in both.stderr


ROOT_ONLY_COMMANDS = [
    ["doctor"],
    ["demo", "--records", "1"],
    ["maintain", "--no-progress"],
    ["compact", "--no-progress"],
    ["scheduler", "--once"],
    ["broker", "start", "--port", "{port}"],
]


@pytest.mark.parametrize("command", ROOT_ONLY_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_root_tools_refuse_to_run_without_a_root(command: list[str], elsewhere: Path) -> None:
    argv = [a.format(port=free_port()) for a in command]
    done = lakelog(*argv, env=tool_env(), cwd=elsewhere, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no storage root given" in done.stderr
    assert "--root" in done.stderr and "$LAKELOG_ROOT" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_root_tools_take_the_root_of_the_environment(tmp_path: Path, elsewhere: Path) -> None:
    root = tmp_path / "root"
    env = tool_env(LAKELOG_ROOT=str(root))
    shown = lakelog("demo", "--records", "5", env=env, cwd=elsewhere)
    assert "Appended 5 records" in shown.stdout
    checked = lakelog("doctor", env=env, cwd=elsewhere)
    assert "0 problem(s) found" in checked.stdout
    catalog = Catalog(str(root))
    try:
        assert catalog.list_topics() == ["quickstart-events"]
    finally:
        catalog.close()
    assert list(elsewhere.iterdir()) == []


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_targets_come_from_the_environment_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Variables are read when a command runs, not when the CLI modules were imported."""
    monkeypatch.setenv("LAKELOG_BOOTSTRAP_SERVER", "b1:1, https://b2:2/")
    assert client_settings(parse("topics", "--list")).bootstrap == ["http://b1:1", "https://b2:2"]
    flag = parse("get-offsets", "--bootstrap-server", "c:3")
    assert client_settings(flag).bootstrap == ["http://c:3"]
    monkeypatch.delenv("LAKELOG_BOOTSTRAP_SERVER")
    assert client_settings(parse("topics", "--list")).bootstrap == ["http://127.0.0.1:8082"]

    monkeypatch.setenv("LAKELOG_ROOT", "/from/env")
    assert storage_root(parse("doctor")) == "/from/env"
    assert storage_root(parse("doctor", "--root", "/flag")) == "/flag"
    monkeypatch.delenv("LAKELOG_ROOT")
    with pytest.raises(InvalidConfigError, match="no storage root given"):
        storage_root(parse("doctor"))


def options_of_every_command() -> Iterator[tuple[str, argparse.Action]]:
    def walk(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(f"{name} {sub_name}".strip(), sub)
            elif action.option_strings:
                yield name, action

    yield from walk("", build_parser())


def test_help_states_the_default_the_tools_use() -> None:
    seen = set()
    for command, action in options_of_every_command():
        text = action.help or ""
        assert "./data/lakelog" not in text, f"{command} {action.option_strings}"
        if "--bootstrap-server" in action.option_strings:
            seen.add(command)
            assert "$LAKELOG_BOOTSTRAP_SERVER" in text and "http://127.0.0.1:8082" in text
        if "--root" in action.option_strings:
            seen.add(command)
            if command == "topics":
                assert "no default" in text and "broker" in text
            else:
                assert "$LAKELOG_ROOT" in text and "required" in text, command
    assert {"topics", "doctor", "maintain", "broker start", "console-consumer"} <= seen


@pytest.mark.parametrize(("taken", "flag"), [("kafka", "--kafka-port"), ("http", "--port")])
def test_a_broker_whose_port_is_taken_says_so_in_one_line(
    taken: str, flag: str, tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        ports = {"http": free_port(), "kafka": free_port(), taken: busy}
        done = lakelog(
            "broker",
            "start",
            "--root",
            str(tmp_path / "root"),
            "--port",
            str(ports["http"]),
            "--kafka-port",
            str(ports["kafka"]),
            check=False,
        )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"127.0.0.1:{busy}" in line and "in use" in line and flag in line
    assert not (tmp_path / "root").exists()
