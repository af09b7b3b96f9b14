"""REST Proxy v2 consumer instances: lakelog consumers living in the broker, keyed by group/name.

Kafka's REST Proxy keeps a Java consumer per instance and lets HTTP clients
drive it; here each instance is a ``lakelog.client.Consumer`` that talks to
the brokers over HTTP like any other client (so it joins groups through the
same coordinator protocol). Consumers are synchronous and not thread-safe:
every call on an instance runs under the instance's lock on a dedicated
thread pool, so long polls and group joins never occupy the event loop or the
default executor the broker's own handlers need.

An instance not used for ``consumer.instance.timeout.ms`` (default 300000,
as in the REST Proxy) is closed by a sweeper thread: its auto-commit (if on)
runs and it leaves its group. When the broker shuts down, its app's lifespan
closes every instance the same way (``ConsumerInstances.close``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from lakelog.client import Consumer
from lakelog.client.subscription import ResetPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")
InstanceFormat = Literal["binary", "json", "avro", "jsonschema", "protobuf"]
DEFAULT_INSTANCE_TIMEOUT_MS = 300_000
#: the REST Proxy's consumer.request.timeout.ms default: how long GET records waits
DEFAULT_REQUEST_TIMEOUT_MS = 1_000


class InstanceExists(Exception):
    """An instance of that name already exists in the group (REST Proxy: 409, 40902)."""


class InstanceNotFound(Exception):
    """No such instance in the group, or it expired (REST Proxy: 404, 40403)."""


@dataclass(frozen=True)
class InstanceConfig:
    format: InstanceFormat = "binary"
    auto_offset_reset: ResetPolicy = "latest"
    auto_commit_enable: bool = False
    fetch_min_bytes: int | None = None
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    instance_timeout_ms: int = DEFAULT_INSTANCE_TIMEOUT_MS


@dataclass(frozen=True)
class Caller:
    """Who created an instance: its consumer talks to the brokers with these credentials,
    so the instance can do exactly what its creator may, and only its creator may use it."""

    principal: str
    api_key: str | None = None
    token: str | None = None


@dataclass
class ConsumerInstance:
    group: str
    name: str
    config: InstanceConfig
    consumer: Consumer
    owner: Caller
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False

    def touch(self) -> None:
        self.last_used = time.monotonic()

    def expired(self, now: float) -> bool:
        return now - self.last_used > self.config.instance_timeout_ms / 1000


ConsumerFactory = Callable[[str, InstanceConfig, Caller], Consumer]


class ConsumerInstances:
    """Every v2 consumer instance of one broker."""

    def __init__(
        self,
        factory: ConsumerFactory,
        *,
        sweep_interval_s: float = 1.0,
        threads: int = 32,
    ) -> None:
        self._factory = factory
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="rest-consumer")
        self._stop = threading.Event()
        self._sweeper = threading.Thread(
            target=self._sweep_loop,
            args=(sweep_interval_s,),
            name="rest-consumer-sweeper",
            daemon=True,
        )
        self._sweeper.start()

    # -- instances ----------------------------------------------------------------

    async def create(
        self, group: str, name: str | None, config: InstanceConfig, caller: Caller
    ) -> ConsumerInstance:
        chosen = name or f"rest-consumer-{uuid.uuid4()}"
        key = (group, chosen)
        with self._lock:
            if key in self._instances:
                raise InstanceExists(
                    f"Consumer instance with the specified name already exists: {chosen!r} "
                    f"in group {group!r}"
                )
        consumer = await self._in_pool(lambda: self._factory(group, config, caller))
        instance = ConsumerInstance(group, chosen, config, consumer, caller)
        with self._lock:
            if key in self._instances:  # created concurrently under the same name
                self._pool.submit(_close_consumer, consumer)
                raise InstanceExists(
                    f"Consumer instance with the specified name already exists: {chosen!r}"
                )
            self._instances[key] = instance
        return instance

    def get(self, group: str, name: str) -> ConsumerInstance:
        with self._lock:
            instance = self._instances.get((group, name))
        if instance is None or instance.closed:
            raise InstanceNotFound(
                f"Consumer instance not found: {name!r} in group {group!r} (never created, "
                "deleted, or expired after consumer.instance.timeout.ms without requests)"
            )
        instance.touch()
        return instance

    async def delete(self, group: str, name: str) -> None:
        instance = self.get(group, name)
        with self._lock:
            self._instances.pop((group, name), None)
        await self.run(instance, lambda c: self._close(instance))

    async def run(self, instance: ConsumerInstance, fn: Callable[[Consumer], T]) -> T:
        """Run ``fn(consumer)`` on the pool, alone on this instance."""

        def call() -> T:
            with instance.lock:
                if instance.closed:
                    raise InstanceNotFound(
                        f"Consumer instance not found: {instance.name!r} was closed"
                    )
                try:
                    return fn(instance.consumer)
                finally:
                    instance.touch()

        return await self._in_pool(call)

    async def _in_pool(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _close(self, instance: ConsumerInstance) -> None:
        """Close under the caller's instance lock (commits if auto-commit, leaves the group)."""
        if instance.closed:
            return
        instance.closed = True
        _close_consumer(instance.consumer)

    # -- expiry ---------------------------------------------------------------------

    def sweep(self, now: float | None = None) -> list[ConsumerInstance]:
        """Close instances idle for longer than their timeout; returns them."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [i for i in self._instances.values() if i.expired(now)]
            for instance in idle:
                del self._instances[(instance.group, instance.name)]
        self._close_all(idle, expired=True)
        return idle

    def _close_all(self, instances: list[ConsumerInstance], *, expired: bool = False) -> None:
        for instance in instances:
            if expired:
                log.info("consumer instance %s/%s expired", instance.group, instance.name)
            with instance.lock:
                try:
                    self._close(instance)
                except Exception:  # one failing instance must not stop the others from closing
                    log.exception(
                        "closing consumer instance %s/%s failed", instance.group, instance.name
                    )

    def _sweep_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.sweep()

    def close(self) -> None:
        """Close every instance (they leave their groups) and stop the sweeper."""
        self._stop.set()
        with self._lock:
            instances = list(self._instances.values())
            self._instances.clear()
        self._close_all(instances)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _close_consumer(consumer: Consumer) -> None:
    """Close the consumer and the connection the factory made for it (the consumer does not
    own a connection it was given)."""
    try:
        consumer.close()
    finally:
        consumer.connection.close()
