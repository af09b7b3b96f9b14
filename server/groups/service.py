"""The broker's group service: who coordinates which group, forwarding, timers, listing.

Routes ask ``route()`` first: ``None`` means this broker coordinates the
group and handles the request itself; otherwise the request was relayed to
the coordinator and its answer is returned as is. The live-broker view comes
from the registry and is refreshed every broker heartbeat interval; groups
this broker no longer coordinates are dropped then (their members are told
NOT_COORDINATOR and find the new coordinator through any broker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import httpx
from fastapi import Request
from fastapi.responses import Response

from lakelog.catalog import Catalog
from lakelog.errors import NotCoordinatorError
from lakelog.groups.ids import validate_group_id
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.groups.state import GroupLimits
from lakelog.storage import Storage
from server.batcher import ProduceBatcher
from server.groups.coordinator import GroupCoordinator
from server.groups.fencing import GenerationStore
from server.groups.forward import FORWARDED_HEADER, Forwarder, acl_version_headers
from server.groups.models import GroupSummary
from server.groups.rendezvous import choose_coordinator
from server.peer_tls import peer_tls_context
from server.registry import BrokerInfo, BrokerRegistry
from server.settings import BrokerSettings

log = logging.getLogger(__name__)

#: Slack on top of a join's rebalance timeout while it is relayed to the coordinator.
FORWARD_JOIN_GRACE_S = 10.0
FORWARD_TIMEOUT_S = 30.0


class GroupService:
    def __init__(
        self,
        settings: BrokerSettings,
        storage: Storage,
        catalog: Catalog,
        registry: BrokerRegistry,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.offsets = OffsetsStore(catalog, settings.offsets_topic_num_partitions)
        # The produce group commit, with the offsets linger: many commits, one Delta commit.
        self.batcher = ProduceBatcher(
            settings.model_copy(update={"linger_ms": settings.offsets_commit_linger_ms})
        )
        self.generations = GenerationStore(storage)
        self.coordinator = GroupCoordinator(
            catalog=catalog,
            generations=self.generations,
            offsets=self.offsets,
            batcher=self.batcher,
            limits=GroupLimits(
                min_session_timeout_ms=settings.group_min_session_timeout_ms,
                max_session_timeout_ms=settings.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=settings.group_initial_rebalance_delay_ms,
                max_size=settings.group_max_size,
            ),
            broker_id=settings.broker_id,
        )
        self.forwarder = Forwarder(
            settings.broker_id, FORWARD_TIMEOUT_S, verify=peer_tls_context(settings)
        )
        self._live: dict[str, BrokerInfo] = {}
        self._live_at = 0.0
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        await self.refresh_brokers()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.batcher.close()
        await self.forwarder.close()

    async def _run(self) -> None:
        tick = self.settings.group_tick_ms / 1000
        refresh = self.settings.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(tick)
            try:
                if time.monotonic() - self._live_at >= refresh:
                    await self.refresh_brokers()
                await self.coordinator.tick()
            except Exception:
                log.exception("group coordinator timer failed; retrying next tick")

    async def refresh_brokers(self) -> None:
        """Re-read the live brokers; drop groups another broker coordinates now."""
        alive = await asyncio.to_thread(self.registry.alive)
        self._live = {b.broker_id: b for b in alive}
        self._live_at = time.monotonic()
        await self.coordinator.drop_groups(
            self.is_local, "another live broker is its coordinator now"
        )

    # -- coordinators ---------------------------------------------------------------

    def coordinator_of(self, group_id: str) -> BrokerInfo:
        validate_group_id(group_id)
        if not self._live:
            return BrokerInfo(
                self.settings.broker_id, self.settings.url, self.registry.started_ms, 0
            )
        return self._live[choose_coordinator(group_id, self._live)]

    def live_brokers(self) -> dict[str, BrokerInfo]:
        """The live brokers by id, as of the last registry read (one per heartbeat)."""
        return self._live

    def is_local(self, group_id: str) -> bool:
        return self.coordinator_of(group_id).broker_id == self.settings.broker_id

    async def route(
        self, request: Request, group_id: str, read_timeout_s: float | None = None
    ) -> Response | None:
        """None: handle here. Otherwise the coordinator's answer to the relayed request."""
        info = self.coordinator_of(group_id)
        if info.broker_id == self.settings.broker_id:
            return None
        if request.headers.get(FORWARDED_HEADER):
            await self.refresh_brokers()  # the sender may know of a change we have not seen
            info = self.coordinator_of(group_id)
            if info.broker_id == self.settings.broker_id:
                return None
            raise NotCoordinatorError(
                f"broker {self.settings.broker_id} is not the coordinator of group "
                f"{group_id!r}; it is {info.broker_id} at {info.url}",
                group_id=group_id,
                coordinator_id=info.broker_id,
                coordinator_url=info.url,
            )
        return await self.forwarder.forward(request, info.url, read_timeout_s)

    # -- listing ---------------------------------------------------------------------

    async def list_groups(self, request: Request) -> list[GroupSummary]:
        """Groups with members on any coordinator, plus groups known only from storage."""
        found: dict[str, GroupSummary] = {}
        for snap in self.coordinator.local_groups():
            count = await self.coordinator.member_count(snap.group_id)
            found[snap.group_id] = GroupSummary(
                group_id=snap.group_id, state=snap.state, members=count
            )
        if request.headers.get(FORWARDED_HEADER):
            return sorted(found.values(), key=lambda g: g.group_id)
        others = [b for b in self._live.values() if b.broker_id != self.settings.broker_id]
        answers = await asyncio.gather(
            *(self._remote_groups(request, b) for b in others), return_exceptions=True
        )
        for broker, answer in zip(others, answers, strict=True):
            if isinstance(answer, BaseException):
                log.warning("cannot list the groups of broker %s: %s", broker.broker_id, answer)
                continue
            for summary in answer:
                found.setdefault(summary.group_id, summary)
        stored = await asyncio.to_thread(self.stored_groups)
        for group_id in stored:
            found.setdefault(group_id, GroupSummary(group_id=group_id, state="Empty", members=0))
        return sorted(found.values(), key=lambda g: g.group_id)

    def stored_groups(self) -> set[str]:
        return self.offsets.groups() | set(self.generations.groups())

    async def _remote_groups(self, request: Request, broker: BrokerInfo) -> list[GroupSummary]:
        headers = {FORWARDED_HEADER: self.settings.broker_id, **acl_version_headers(request)}
        if "authorization" in request.headers:
            headers["Authorization"] = request.headers["authorization"]
        answer = await self.forwarder.client().get(
            f"{broker.url.rstrip('/')}/v1/groups", headers=headers, timeout=httpx.Timeout(10.0)
        )
        answer.raise_for_status()
        return [GroupSummary(**g) for g in answer.json()["groups"]]
