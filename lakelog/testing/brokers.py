"""Server subprocesses on free loopback ports, ready once ``/healthz`` answers 200.

``start_broker`` runs ``python -m server``; ``start_server`` any module that takes
``--port``. A :class:`ServerProcess` stops as an operator would or crashes on demand.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

LOOPBACK = "127.0.0.1"
#: How long a server may take to answer ``/healthz`` after it was started.
START_TIMEOUT_S = 60.0


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port of ``host`` that was free a moment ago (bound to port 0, then released).

    Never one of the last ``RECENT_PORTS`` given: the kernel may hand a released port
    out again at once, so two servers started together could get the same one.
    """
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        with _RECENT_LOCK:
            if port not in _RECENT:
                _RECENT.append(port)
                return port


RECENT_PORTS = 1024
_RECENT: deque[int] = deque(maxlen=RECENT_PORTS)
_RECENT_LOCK = threading.Lock()


def wait_for(
    condition: Callable[[], bool], what: str, timeout_s: float, interval_s: float = 0.1
) -> None:
    """Poll ``condition`` until it holds; RuntimeError naming ``what`` after ``timeout_s``
    (a guard against a hang, never a claim about speed)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what} after {timeout_s:g} s")
        time.sleep(interval_s)


@dataclass
class ServerProcess:
    """A server subprocess listening on ``url``; its output goes to ``log_path``."""

    name: str
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    #: ``host:port`` of a broker's Kafka listener (its ``bootstrap.servers``), if it has one.
    kafka: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, as in a crash."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Graceful stop (SIGTERM), as an operator would; SIGKILL after 20 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        """Everything the server printed so far."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def log_tail(self, chars: int = 5000) -> str:
        return self.log()[-chars:]


def start_server(
    name: str,
    args: Sequence[str],
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    host: str = LOOPBACK,
    verify: ssl.SSLContext | None = None,
    timeout_s: float = START_TIMEOUT_S,
    ready: Callable[[ServerProcess], bool] | None = None,
    port: int | None = None,
) -> ServerProcess:
    """Run ``python args... --port P`` on ``port`` (a free port of ``host`` when None);
    return once it is healthy.

    Output goes to ``log_dir/<name>-<port>.log``. ``verify``: the https probe's TLS
    context (None: http); ``ready`` replaces the ``/healthz`` probe. A server that exits
    or is not healthy in ``timeout_s`` is killed, its log in the RuntimeError.
    """
    port = free_port(host) if port is None else port
    log_path = log_dir / f"{name}-{port}.log"
    with log_path.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, *args, "--port", str(port)],
            env=dict(os.environ if env is None else env),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    scheme = "http" if verify is None else "https"
    server = ServerProcess(name, f"{scheme}://{host}:{port}", port, process, log_path)

    def answers_healthz(server: ServerProcess) -> bool:
        try:
            probe = httpx.get(f"{server.url}/healthz", timeout=2, verify=verify or True)
        except httpx.HTTPError:
            return False
        return probe.status_code == 200

    def healthy() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited early with code {process.returncode}")
        return (ready or answers_healthz)(server)

    try:
        awaited = "answer /healthz" if ready is None else "be ready"
        wait_for(healthy, f"{name} on port {port} to {awaited}", timeout_s, 0.05)
    except RuntimeError as exc:
        server.kill()
        raise RuntimeError(f"{exc}; its log:\n{server.log_tail()}") from None
    return server


def broker_probe_context(settings: Mapping[str, object]) -> ssl.SSLContext | None:
    """The health probe's TLS context for a broker started with ``settings`` (None: http);
    it trusts ``ssl_certfile`` and presents it when client certificates are required."""
    certfile = settings.get("ssl_certfile")
    if not certfile:
        return None
    context = ssl.create_default_context(cafile=str(certfile))
    if settings.get("ssl_ca_certs"):
        context.load_cert_chain(str(certfile), str(settings["ssl_keyfile"]))
    return context


def start_broker(
    root: str,
    log_dir: Path,
    settings: Mapping[str, object] | None = None,
    *,
    name: str = "broker",
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    port: int | None = None,
) -> ServerProcess:
    """A broker (``python -m server``) over ``root`` on ``port`` (a free loopback port when
    None), once healthy.

    ``settings`` (``linger_ms=5``) become ``LAKELOG_<NAME>`` variables on top of ``env``.
    Unless they name ``kafka_listeners``, the Kafka listener is on another free port
    (``ServerProcess.kafka``), SASL_PLAINTEXT when authentication is on.
    """
    settings = dict(settings or {})
    environment = dict(os.environ if env is None else env)
    kafka: str | None = None
    auth_mode = str(settings.get("auth_mode", environment.get("LAKELOG_AUTH_MODE", "none")))
    if "kafka_listeners" not in settings:
        kafka = f"{LOOPBACK}:{free_port()}"
        protocol = "PLAINTEXT" if auth_mode == "none" else "SASL_PLAINTEXT"
        settings["kafka_listeners"] = f"{protocol}://{kafka}"
    for key, value in settings.items():
        environment[f"LAKELOG_{key.upper()}"] = str(value)
    server = start_server(
        name,
        ["-m", "server", "--root", root],
        log_dir,
        env=environment,
        cwd=cwd,
        verify=broker_probe_context(settings),
        port=port,
    )
    server.kafka = kafka
    return server
