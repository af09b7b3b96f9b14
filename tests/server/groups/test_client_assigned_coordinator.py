"""Client-assigned groups (Kafka protocol) on the broker's coordinator, over a real local root.

The coordinator is driven in process, as the Kafka listener drives it: three
members join and sync concurrently as asyncio tasks. The coordinator's clock
is a test clock, moved explicitly, so the initial rebalance delay and the
rebalance timeout pass exactly when a test says (the tasks' own waits are
bounded by generous guards that only a broken coordinator reaches).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import pytest

from lakelog.catalog import Catalog
from lakelog.errors import (
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from lakelog.groups.client_assigned import (
    ClientAssignedJoinRequest,
    ClientAssignedJoinResult,
    SyncResult,
)
from lakelog.groups.codec import CommittedOffset
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.groups.state import AssignmentMode, GroupLimits, JoinRequest
from lakelog.structs import TopicPartition
from server.batcher import ProduceBatcher
from server.groups.coordinator import GroupCoordinator
from server.groups.fencing import GROUPS_DIR, GenerationStore
from server.settings import BrokerSettings
from tests.fixtures.roots import RootSpec

T = TypeVar("T")
GUARD_S = 60.0  # only reached when the coordinator hangs
DELAY_MS = 3_000
REBALANCE_MS = 10_000
LIMITS = GroupLimits(min_session_timeout_ms=100, initial_rebalance_delay_ms=DELAY_MS)

local_only = pytest.mark.parametrize("make_root", ["local"], indirect=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class Broker:
    coordinator: GroupCoordinator
    clock: Clock
    storage_root: RootSpec


@asynccontextmanager
async def coordinator(root: RootSpec, broker_id: str) -> AsyncIterator[Broker]:
    """A broker's coordinator over ``root``, as GroupService builds it, with a test clock."""
    catalog = Catalog(root.url)
    batcher = ProduceBatcher(BrokerSettings(root=root.url, linger_ms=0))
    clock = Clock()
    coord = GroupCoordinator(
        catalog=catalog,
        generations=GenerationStore(root.open()),
        offsets=OffsetsStore(catalog, 3),
        batcher=batcher,
        limits=LIMITS,
        broker_id=broker_id,
        clock=clock,
    )
    try:
        yield Broker(coord, clock, root)
    finally:
        await batcher.close()
        catalog.close()


def request(index: int, *protocols: tuple[str, bytes]) -> ClientAssignedJoinRequest:
    return ClientAssignedJoinRequest(
        client_id=f"kafka-{index}",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer",
        protocols=protocols or (("range", f"sub-{index}".encode()), ("roundrobin", b"rr")),
        host=f"/10.0.0.{index}",
    )


async def join(broker: Broker, group: str, index: int) -> ClientAssignedJoinResult:
    """Kafka's two-step join: MEMBER_ID_REQUIRED, then the join with that id."""
    with pytest.raises(MemberIdRequiredError) as required:
        await broker.coordinator.join(group, "", request(index))
    member_id = str(required.value.details["member_id"])
    return await broker.coordinator.join(group, member_id, request(index))


def assignment_for(result: ClientAssignedJoinResult) -> dict[str, bytes] | None:
    """What a leader computes: here, each member's metadata echoed back as its assignment."""
    if not result.is_leader:
        return None
    return {m.member_id: b"assigned:" + m.metadata for m in result.members}


async def join_and_sync(
    broker: Broker, group: str, index: int
) -> tuple[ClientAssignedJoinResult, SyncResult]:
    result = await join(broker, group, index)
    synced = await broker.coordinator.sync_assignments(
        group, result.member_id, result.generation_id, assignment_for(result)
    )
    return result, synced


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    async def poll() -> None:
        while not await condition():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), GUARD_S)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def all_joined(broker: Broker, group: str, count: int) -> None:
    """Wait until ``count`` members wait in their joins, then end the initial delay."""

    async def joined() -> bool:
        return await broker.coordinator.member_count(group) == count

    await until(joined, f"{count} members in their joins")
    broker.clock.now += DELAY_MS
    await broker.coordinator.tick()


def run(main: Awaitable[T]) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(main, GUARD_S * 2)

    return asyncio.run(guarded())


@local_only
def test_three_members_join_and_sync_concurrently_and_the_generation_is_durable(
    root: RootSpec,
) -> None:
    async def main() -> None:
        async with coordinator(root, "b1") as broker:
            tasks = [asyncio.create_task(join_and_sync(broker, "kg", i)) for i in range(3)]
            await all_joined(broker, "kg", 3)
            answers = await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
            results = [r for r, _ in answers]
            leader = results[0].leader_id
            assert {r.leader_id for r in results} == {leader}
            assert {r.generation_id for r in results} == {1}
            assert {r.protocol_name for r in results} == {"range"}
            [leading] = [r for r in results if r.is_leader]
            assert leading.members[0].member_id == leader  # the first to join leads
            assert {m.member_id for m in leading.members} == {r.member_id for r in results}
            for result, synced in answers:
                index = int(result.member_id.split("-")[1])
                assert synced.assignment == f"assigned:sub-{index}".encode()
                assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
                if not result.is_leader:
                    assert result.members == ()

            snap = await broker.coordinator.snapshot("kg")
            assert snap.state == "Stable" and snap.protocol_type == "consumer"
            assert snap.assignment_mode is AssignmentMode.CLIENT and snap.leader_id == leader
            by_id = {d.member_id: d for d in snap.descriptions}
            for result, _ in answers:
                described = by_id[result.member_id]
                index = int(result.member_id.split("-")[1])
                assert described.metadata == f"sub-{index}".encode()
                assert described.assignment == b"assigned:" + described.metadata
                assert (described.client_id, described.host) == (
                    f"kafka-{index}",
                    f"/10.0.0.{index}",
                )

            # The generation file holds what a new coordinator needs.
            stored = json.loads(root.open().read_bytes(f"{GROUPS_DIR}/kg/{1:020d}.json").decode())
            assert stored["assignment_mode"] == "client" and stored["leader_id"] == leader
            assert stored["protocol_type"] == "consumer" and stored["protocol"] == "range"
            assert {
                m["member_id"]: base64.b64decode(m["assignment_bytes"]) for m in stored["members"]
            } == {d.member_id: d.assignment for d in by_id.values()}

            # Heartbeats and commits follow the generation, as for any member.
            catalog = broker.coordinator.catalog
            await asyncio.to_thread(catalog.create_topic, "orders", 2)
            member = results[1].member_id
            await broker.coordinator.heartbeat("kg", member, 1)
            offsets = {TopicPartition("orders", 0): CommittedOffset(7, "", 1)}
            await broker.coordinator.commit("kg", member, 1, offsets)
            with pytest.raises(IllegalGenerationError):
                await broker.coordinator.commit("kg", member, 0, offsets)
            fetched = await asyncio.to_thread(broker.coordinator.offsets.fetch, "kg")
            assert fetched[TopicPartition("orders", 0)].offset == 7

            # An HTTP member cannot join a group whose members assign themselves.
            http = JoinRequest("h", 10_000, REBALANCE_MS, ("range",), ("orders",))
            with pytest.raises(InconsistentGroupProtocolError):
                await broker.coordinator.join("kg", "", http)

        # Another broker takes the group over from the generation file.
        async with coordinator(root, "b2") as other:
            snap = await other.coordinator.snapshot("kg")
            assert snap.assignment_mode is AssignmentMode.CLIENT and snap.leader_id == leader
            assert snap.generation_id == 1 and snap.state == "PreparingRebalance"
            assert {d.member_id: d.assignment for d in snap.descriptions} == {
                d.member_id: d.assignment for d in by_id.values()
            }
            with pytest.raises(RebalanceInProgressError):
                await other.coordinator.heartbeat("kg", member, 1)

            async def rejoin(result: ClientAssignedJoinResult) -> SyncResult:
                index = int(result.member_id.split("-")[1])
                again = await other.coordinator.join("kg", result.member_id, request(index))
                assert again.generation_id == 2 and again.leader_id == leader
                return await other.coordinator.sync_assignments(
                    "kg", again.member_id, 2, assignment_for(again)
                )

            resynced = await asyncio.gather(*(rejoin(r) for r in results))
            assert {s.generation_id for s in resynced} == {2}

    run(main())


@local_only
def test_followers_wait_for_the_leader_and_a_silent_leader_is_removed(root: RootSpec) -> None:
    async def main() -> None:
        async with coordinator(root, "b1") as broker:
            coord = broker.coordinator
            tasks = [asyncio.create_task(join(broker, "slow", i)) for i in range(3)]
            await all_joined(broker, "slow", 3)
            results = await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
            [leader] = [r for r in results if r.is_leader]
            followers = [r for r in results if not r.is_leader]
            waiting = [
                asyncio.create_task(coord.sync_assignments("slow", f.member_id, 1, None))
                for f in followers
            ]
            await asyncio.sleep(0.1)
            assert not any(t.done() for t in waiting)  # nothing to hand out yet
            await coord.heartbeat("slow", leader.member_id, 1)  # alive, but not assigning

            # One rebalance timeout later the leader, which never synced, is removed.
            broker.clock.now += REBALANCE_MS + 1
            await coord.tick()
            for task in waiting:
                with pytest.raises(RebalanceInProgressError):
                    await asyncio.wait_for(task, GUARD_S)
            with pytest.raises(UnknownMemberIdError):
                await coord.heartbeat("slow", leader.member_id, 1)

            # The followers rejoin; the earliest of them leads generation 2.
            again = await asyncio.gather(
                *(
                    coord.join("slow", f.member_id, request(int(f.member_id.split("-")[1])))
                    for f in followers
                )
            )
            in_join_order = [m.member_id for m in leader.members if m.member_id != leader.member_id]
            assert {r.generation_id for r in again} == {2}
            assert {r.leader_id for r in again} == {in_join_order[0]}

    run(main())


@local_only
def test_two_coordinators_cannot_both_complete_a_generation(root: RootSpec) -> None:
    """The generation file fences a coordinator that still thinks it owns the group."""

    async def main() -> None:
        async with coordinator(root, "b1") as first, coordinator(root, "b2") as second:
            formed: list[ClientAssignedJoinResult] = []
            for broker in (first, second):
                task = asyncio.create_task(join(broker, "split", 0))
                await all_joined(broker, "split", 1)
                formed.append(await asyncio.wait_for(task, GUARD_S))
            assert [r.generation_id for r in formed] == [1, 1]
            done = await first.coordinator.sync_assignments(
                "split", formed[0].member_id, 1, {formed[0].member_id: b"x"}
            )
            assert done.assignment == b"x"
            with pytest.raises(NotCoordinatorError):
                await second.coordinator.sync_assignments(
                    "split", formed[1].member_id, 1, {formed[1].member_id: b"y"}
                )

    run(main())


@local_only
def test_generation_files_with_gaps_keep_the_newest_two(root: RootSpec) -> None:
    """A client-assigned generation whose leader never synced leaves a gap in the numbers."""
    storage = root.open()
    store = GenerationStore(storage)
    for generation in (1, 2, 3, 6, 9):
        assert store.write({"group_id": "gaps", "generation_id": generation, "members": []})
    left = sorted(e.path.rsplit("/", 1)[-1] for e in storage.list_dir(f"{GROUPS_DIR}/gaps"))
    assert left == [f"{6:020d}.json", f"{9:020d}.json"]
    latest = store.latest("gaps")
    assert latest is not None and latest["generation_id"] == 9
    assert not store.write({"group_id": "gaps", "generation_id": 9, "members": []})
