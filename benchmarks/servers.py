"""The server processes of the benchmarks: brokers and the broker suite's baseline apps.

Both are started with :mod:`lakelog.testing.brokers` (the launcher the
tests use too) from the project directory, quiet (log level warning), on
free loopback ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from benchmarks.common import PROJECT
from lakelog.testing.brokers import LOOPBACK, ServerProcess, start_server
from lakelog.testing.brokers import start_broker as start_broker_process
from lakelog.testing.env import child_env


def project_env() -> dict[str, str]:
    """The environment of a subprocess (a broker, a baseline app, a maintenance job), which
    then imports this checkout's code, as the benchmark process does."""
    return child_env(PROJECT)


def start_broker(
    root: Path | str,
    log_dir: Path,
    settings: Mapping[str, object] | None = None,
    name: str = "broker",
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """A broker over ``root`` (a local path or a URL); ``settings`` by name, as ``linger_ms=5``.

    ``env`` adds variables to the project environment (an S3 store's endpoint
    and credentials, say).
    """
    return start_broker_process(
        str(root),
        log_dir,
        {"host": LOOPBACK, "log_level": "warning", **(settings or {})},
        name=name,
        env={**project_env(), **(env or {})},
        cwd=PROJECT,
    )


def start_baseline(kind: str, log_dir: Path, root: Path | None = None) -> ServerProcess:
    """A baseline app of the broker suite (``empty`` or ``naive``, see broker_baselines)."""
    args = ["-m", "benchmarks.broker_baselines", "serve", kind]
    if root is not None:
        args += ["--root", str(root)]
    return start_server(kind, args, log_dir, env=project_env(), cwd=PROJECT)
