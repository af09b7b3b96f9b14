"""Which brokers are alive: each one keeps ``_meta/brokers/<id>.json`` fresh.

There is no controller; the registry lets clients discover brokers and fail
over, and lets every broker pick the same live group coordinator and commit
leader. An entry older than the session timeout is dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field

from lakelog.storage import Storage, join
from server.settings import BrokerSettings

log = logging.getLogger(__name__)

BROKERS_DIR = "_meta/brokers"


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: str
    url: str
    started_ms: int
    heartbeat_ms: int
    #: Advertised Kafka listener addresses by listener name ("host:port").
    kafka: dict[str, str] = field(default_factory=dict)


class BrokerRegistry:
    def __init__(self, storage: Storage, settings: BrokerSettings) -> None:
        self.storage = storage
        self.settings = settings
        self.started_ms = int(time.time() * 1000)
        self._task: asyncio.Task[None] | None = None
        #: The Kafka listeners' advertised addresses, once they are bound.
        self.kafka_addresses: dict[str, str] = {}

    @property
    def _path(self) -> str:
        return join(BROKERS_DIR, f"{self.settings.broker_id}.json")

    def _beat(self) -> None:
        info = BrokerInfo(
            self.settings.broker_id,
            self.settings.url,
            self.started_ms,
            int(time.time() * 1000),
            dict(self.kafka_addresses),
        )
        self.storage.put(self._path, json.dumps(asdict(info)).encode())

    async def start(self) -> None:
        await asyncio.to_thread(self._beat)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 1000)
            try:
                await asyncio.to_thread(self._beat)
            except OSError as exc:
                log.warning("broker heartbeat failed (will retry): %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self.storage.delete, self._path)

    def alive(self) -> list[BrokerInfo]:
        """Brokers whose heartbeat is recent, oldest first."""
        now = int(time.time() * 1000)
        brokers = []
        for entry in self.storage.list_dir(BROKERS_DIR):
            if entry.is_dir or not entry.path.endswith(".json"):
                continue
            try:
                info = BrokerInfo(**json.loads(self.storage.read_bytes(entry.path)))
            except FileNotFoundError:
                continue  # stopped between listing and reading
            except (ValueError, TypeError) as exc:
                log.warning("ignoring unreadable broker entry %s: %s", entry.path, exc)
                continue
            if now - info.heartbeat_ms <= self.settings.broker_session_timeout_ms:
                brokers.append(info)
        return sorted(brokers, key=lambda b: (b.started_ms, b.broker_id))
