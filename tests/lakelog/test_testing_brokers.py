"""The launcher tests and benchmarks share: a server is handed over healthy or not at all."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import httpx
import psutil
import pytest

from lakelog.testing.brokers import free_port, start_broker, start_server, wait_for

pytestmark = pytest.mark.integration  # each test starts a server process

SLEEPER = "import time; print('listening nowhere', flush=True); time.sleep(600)"


def test_a_server_that_exits_is_reported_with_its_output(tmp_path: Path) -> None:
    args = ["-c", "import sys; print('bad root', flush=True); sys.exit(3)"]
    with pytest.raises(RuntimeError, match="dies exited early with code 3") as failed:
        start_server("dies", args, tmp_path)
    assert "bad root" in str(failed.value)


def test_a_server_that_never_answers_is_killed(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="gave up waiting for mute on port") as failed:
        start_server("mute", ["-c", SLEEPER], tmp_path, timeout_s=3)
    assert "listening nowhere" in str(failed.value)
    # The launcher reaped what it started: no child of this test is left sleeping.
    assert not [p for p in psutil.Process().children() if SLEEPER in " ".join(p.cmdline())]


def test_wait_for_names_what_it_waited_for() -> None:
    with pytest.raises(RuntimeError, match=r"gave up waiting for the moon after 0.2 s"):
        wait_for(lambda: False, "the moon", timeout_s=0.2, interval_s=0.05)


def test_a_broker_gets_its_settings_and_stops_like_an_operator_stops_it(tmp_path: Path) -> None:
    broker = start_broker(str(tmp_path / "root"), tmp_path, {"broker_id": "launched-7"})
    try:
        listed = httpx.get(f"{broker.url}/v1/brokers", timeout=30).json()["brokers"]
        assert [b["broker_id"] for b in listed] == ["launched-7"]
        assert broker.log_path.parent == tmp_path and broker.url.endswith(f":{broker.port}")
    finally:
        broker.stop()
    # Ended by the SIGTERM itself (uvicorn re-raises it after its graceful shutdown), not SIGKILL.
    assert broker.process.returncode in (0, -signal.SIGTERM), broker.log()


def test_kill_is_a_crash(tmp_path: Path) -> None:
    broker = start_broker(str(tmp_path / "root"), tmp_path)
    broker.kill()
    assert broker.process.returncode == -signal.SIGKILL


def test_a_free_port_can_be_bound() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


def test_free_ports_given_together_differ() -> None:
    # Servers started together bind their ports only once running: the ports this
    # process hands out must differ even though each was released before the next.
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
