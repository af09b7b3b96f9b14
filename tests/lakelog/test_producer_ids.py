"""Producer id blocks: no id is ever handed out twice, across threads, processes and restarts.

The racing tests run on a local directory and on the S3-protocol server, and
check that the race really happened (some allocator lost a claim to another)
besides the ids being unique: each claimed block must also name the broker
that handed out its ids, and the blocks must tile the id space from
``FIRST_ALLOCATED_ID`` without gaps or overlaps.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from lakelog.client.accumulator import new_producer_id
from lakelog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    KafkaStorageError,
    UnknownServerError,
)
from lakelog.producer_ids import (
    FIRST_ALLOCATED_ID,
    MAX_PRODUCER_ID,
    PRODUCER_IDS_DIR,
    ProducerIdAllocator,
    ProducerIdBlock,
    block_path,
)
from lakelog.storage import Storage
from lakelog.storage.local import LocalStorage
from tests.fixtures.brokers import root_env
from tests.fixtures.roots import RootSpec
from tests.lakelog.test_multiprocess import _open_gate

#: Racing allocators, and ids each takes: small blocks so that they claim often.
RACERS = 6
IDS_EACH = 60
RACE_BLOCK_SIZE = 3


def _blocks(storage: Storage) -> list[ProducerIdBlock]:
    return [
        ProducerIdBlock.from_json(e.path, storage.read_bytes(e.path))
        for e in storage.list_dir(PRODUCER_IDS_DIR)
    ]


def _assert_blocks_tile_and_own(storage: Storage, handed: dict[str, list[int]]) -> None:
    """Blocks chain from FIRST_ALLOCATED_ID, and every id lies in a block of its broker."""
    blocks = sorted(_blocks(storage), key=lambda b: b.number)
    assert [b.number for b in blocks] == list(range(len(blocks)))
    expected_first = FIRST_ALLOCATED_ID
    for block in blocks:
        assert block.first_id == expected_first, f"block {block.number} leaves a gap or overlaps"
        expected_first = block.last_id + 1
    for broker, ids in handed.items():
        for pid in ids:
            (owner,) = [b for b in blocks if b.first_id <= pid <= b.last_id]
            assert owner.broker_id == broker, f"id {pid} came from {broker}'s allocator"


def test_racing_threads_never_share_an_id(make_root: Callable[[], RootSpec]) -> None:
    root = make_root()
    allocators = [
        ProducerIdAllocator(root.open(), f"broker-{i}", block_size=RACE_BLOCK_SIZE)
        for i in range(RACERS)
    ]
    start = threading.Barrier(RACERS)
    handed: dict[str, list[int]] = {a.broker_id: [] for a in allocators}
    errors: list[BaseException] = []

    def take(allocator: ProducerIdAllocator) -> None:
        try:
            start.wait()
            for _ in range(IDS_EACH):
                handed[allocator.broker_id].append(allocator.next_id())
        except BaseException as exc:  # re-raised in the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=take, args=(a,)) for a in allocators]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

    every = [pid for ids in handed.values() for pid in ids]
    duplicates = [pid for pid, n in Counter(every).items() if n > 1]
    assert not duplicates, f"ids handed out twice: {duplicates[:10]}"
    assert all(FIRST_ALLOCATED_ID <= pid <= MAX_PRODUCER_ID for pid in every)
    assert sum(a.claims_lost for a in allocators) > 0, "the allocators never raced"
    assert sum(a.blocks_claimed for a in allocators) == len(_blocks(root.open()))
    _assert_blocks_tile_and_own(root.open(), handed)


@pytest.mark.slow
def test_racing_processes_never_share_an_id(
    make_root: Callable[[], RootSpec], tmp_path: Path
) -> None:
    root = make_root()
    gate = tmp_path / "gate"
    gate.mkdir()
    workers = [f"broker-{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.lakelog.producer_id_worker",
                "--root",
                root.url,
                "--broker",
                worker,
                "--count",
                str(IDS_EACH),
                "--block-size",
                str(RACE_BLOCK_SIZE),
                "--gate",
                str(gate),
                "--out",
                str(tmp_path / f"{worker}.json"),
            ],
            env=root_env(root),
            stderr=subprocess.PIPE,
        )
        for worker in workers
    ]
    try:
        _open_gate(gate, workers, procs)
        for proc in procs:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err.decode()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    reports = {w: json.loads((tmp_path / f"{w}.json").read_text()) for w in workers}
    handed = {w: list(r["ids"]) for w, r in reports.items()}
    every = [pid for ids in handed.values() for pid in ids]
    assert len(every) == len(workers) * IDS_EACH
    duplicates = [pid for pid, n in Counter(every).items() if n > 1]
    assert not duplicates, f"ids handed out twice: {duplicates[:10]}"
    assert sum(r["claims_lost"] for r in reports.values()) > 0, "the processes never raced"
    _assert_blocks_tile_and_own(root.open(), handed)


def test_a_spent_block_moves_on_to_the_next(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path / "root"))
    allocator = ProducerIdAllocator(storage, "b1", block_size=3, clock_ms=lambda: 1_234)
    assert allocator.block is None and not storage.list_dir(PRODUCER_IDS_DIR)

    ids = [allocator.next_id() for _ in range(7)]

    assert ids == list(range(FIRST_ALLOCATED_ID, FIRST_ALLOCATED_ID + 7))
    assert [e.path for e in storage.list_dir(PRODUCER_IDS_DIR)] == [
        block_path(0),
        block_path(1),
        block_path(2),
    ]
    assert block_path(2) == f"{PRODUCER_IDS_DIR}/00000000000000000002.json"
    assert json.loads(storage.read_bytes(block_path(1))) == {
        "block": 1,
        "first_producer_id": FIRST_ALLOCATED_ID + 3,
        "last_producer_id": FIRST_ALLOCATED_ID + 5,
        "size": 3,
        "broker_id": "b1",
        "claimed_ms": 1_234,
    }
    assert allocator.block is not None and allocator.block.number == 2
    assert (allocator.blocks_claimed, allocator.claims_lost) == (3, 0)


def test_a_restarted_allocator_never_reuses_a_block(tmp_path: Path) -> None:
    """The rest of a block dies with the process that claimed it; restarts claim anew."""
    root = str(tmp_path / "root")
    before = ProducerIdAllocator(LocalStorage(root), "b1", block_size=10)
    first_run = [before.next_id() for _ in range(2)]  # 8 ids of block 0 left unused

    restarted = ProducerIdAllocator(LocalStorage(root), "b1", block_size=10)
    second_run = [restarted.next_id() for _ in range(12)]
    again = ProducerIdAllocator(LocalStorage(root), "b1", block_size=10)
    third_run = [again.next_id()]

    assert first_run == [FIRST_ALLOCATED_ID, FIRST_ALLOCATED_ID + 1]
    assert second_run == list(range(FIRST_ALLOCATED_ID + 10, FIRST_ALLOCATED_ID + 22))
    assert third_run == [FIRST_ALLOCATED_ID + 30]
    assert [b.number for b in _blocks(LocalStorage(root))] == [0, 1, 2, 3]


def test_blocks_of_different_sizes_chain_without_overlap(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path / "root"))
    big = ProducerIdAllocator(storage, "big", block_size=1_000)
    small = ProducerIdAllocator(storage, "small", block_size=2)

    assert big.next_id() == FIRST_ALLOCATED_ID
    assert [small.next_id() for _ in range(3)] == [
        FIRST_ALLOCATED_ID + 1_000,
        FIRST_ALLOCATED_ID + 1_001,
        FIRST_ALLOCATED_ID + 1_002,
    ]
    assert [(b.broker_id, b.first_id, b.last_id) for b in _blocks(storage)] == [
        ("big", FIRST_ALLOCATED_ID, FIRST_ALLOCATED_ID + 999),
        ("small", FIRST_ALLOCATED_ID + 1_000, FIRST_ALLOCATED_ID + 1_001),
        ("small", FIRST_ALLOCATED_ID + 1_002, FIRST_ALLOCATED_ID + 1_003),
    ]


def test_a_claim_lost_to_another_broker_takes_the_next_block(tmp_path: Path) -> None:
    """An allocator that listed before a rival's claim loses block 1 and takes block 2."""
    storage = LocalStorage(str(tmp_path / "root"))
    ProducerIdAllocator(storage, "first", block_size=5).next_id()

    class RivalClaimsFirst(LocalStorage):
        """Another broker creates block 1 between this allocator's listing and its claim."""

        def put_if_absent(
            self, path: str, data: bytes, ready: Callable[[], None] | None = None
        ) -> bool:
            if path == block_path(1):
                ProducerIdAllocator(storage, "rival", block_size=5).next_id()
            return super().put_if_absent(path, data, ready)

    late = ProducerIdAllocator(RivalClaimsFirst(str(tmp_path / "root")), "late", block_size=5)
    assert late.next_id() == FIRST_ALLOCATED_ID + 10
    assert (late.blocks_claimed, late.claims_lost) == (1, 1)
    assert [b.broker_id for b in _blocks(storage)] == ["first", "rival", "late"]


@pytest.mark.parametrize(
    "damage",
    [
        b"not json",
        b'{"block": 1}',
        ProducerIdBlock(7, FIRST_ALLOCATED_ID + 5, 5, "b1", 0).to_json(),
        ProducerIdBlock(1, 5, 5, "b1", 0).to_json(),
    ],
    ids=["not-json", "fields-missing", "another-blocks-record", "below-the-allocated-range"],
)
def test_an_unreadable_highest_block_is_refused_and_nothing_is_claimed(
    tmp_path: Path, damage: bytes
) -> None:
    """Skipping it could restart the chain below its range: the allocator stops instead."""
    storage = LocalStorage(str(tmp_path / "root"))
    ProducerIdAllocator(storage, "b1", block_size=5).next_id()
    storage.put(block_path(1), damage)

    with pytest.raises(CorruptRecordError, match=r"00000000000000000001\.json"):
        ProducerIdAllocator(storage, "b2", block_size=5).next_id()
    assert len(storage.list_dir(PRODUCER_IDS_DIR)) == 2


def test_the_id_space_running_out_is_an_error_not_a_wrap(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path / "root"))
    top = ProducerIdBlock(0, MAX_PRODUCER_ID - 9, 10, "b0", 0)
    assert storage.put_if_absent(block_path(0), top.to_json())

    with pytest.raises(UnknownServerError, match="exhausted"):
        ProducerIdAllocator(storage, "b1", block_size=10).next_id()
    assert len(storage.list_dir(PRODUCER_IDS_DIR)) == 1


def test_a_storage_failure_is_a_retriable_storage_error(tmp_path: Path) -> None:
    class Unreachable(LocalStorage):
        def put_if_absent(
            self, path: str, data: bytes, ready: Callable[[], None] | None = None
        ) -> bool:
            raise ConnectionError("object store unreachable")

    allocator = ProducerIdAllocator(Unreachable(str(tmp_path / "root")), "b1")
    with pytest.raises(KafkaStorageError, match="unreachable") as raised:
        allocator.next_id()
    assert raised.value.retriable
    assert allocator.block is None


def test_the_event_loop_path_claims_in_a_thread_then_counts_in_memory(tmp_path: Path) -> None:
    allocator = ProducerIdAllocator(LocalStorage(str(tmp_path / "root")), "b1", block_size=2)
    assert allocator.next_id_nowait() is None  # nothing claimed yet: that needs I/O

    async def take(n: int) -> list[int]:
        return [await allocator.next_id_async() for _ in range(n)]

    assert asyncio.run(take(3)) == [FIRST_ALLOCATED_ID + i for i in range(3)]
    assert allocator.next_id_nowait() == FIRST_ALLOCATED_ID + 3
    assert allocator.next_id_nowait() is None  # block 1 is spent
    assert allocator.blocks_claimed == 2


def test_an_invalid_block_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="block_size"):
        ProducerIdAllocator(LocalStorage(str(tmp_path)), "b1", block_size=0)


def test_client_chosen_ids_stay_below_the_allocated_range() -> None:
    assert all(0 <= new_producer_id() < FIRST_ALLOCATED_ID for _ in range(10_000))
