"""What a fault test checks: records acknowledged against records found in the log.

A producer under fault records every send in a :class:`Ledger`: the value
(unique per send), and either the (partition, offset) the broker acknowledged
or that no acknowledgement arrived (the request failed or its outcome is
unknown). After the fault the log is read back *from the storage root* with
the core library, not through a broker, so a broker that answers from memory
cannot hide a loss. :func:`check` then reports and asserts:

- lost: acknowledged records missing at their acknowledged offset (must be 0);
- duplicated: values stored more than once; 0 for idempotent producers, and
  for others only values whose acknowledgement never arrived;
- never acknowledged: values no attempt got acknowledged; 0 for idempotent
  producers, which retry until their delivery timeout;
- acknowledged after the fault: acknowledgements that arrived after the fault
  ended (the last kill, the store back); a test names how many it requires,
  since a broker that accepts nothing more loses nothing either;
- strangers: stored values nobody sent (must be none);
- offsets dense from the log start in every partition.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

from lakelog.catalog import Catalog
from lakelog.client import RecordMetadata
from tests.fixtures.roots import RootSpec


@dataclass
class Ledger:
    """Sends and their outcomes, filled from producer threads (thread-safe).

    Acknowledgements and failures are counted apart: a fault test waits for
    acknowledgements (``acknowledgements``, ``mark``), because a broker that
    answers every request with an error also "settles" every send.
    """

    acknowledged: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    #: Values with at least one attempt whose acknowledgement never arrived (an
    #: error or no answer), even if a later attempt was acknowledged.
    unacknowledged: set[bytes] = field(default_factory=set)
    #: Single requests a test sent by hand to see what a client gets during a fault:
    #: never retried, so they may be stored once or not at all.
    probes: set[bytes] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)
    _acks: int = 0
    _failures: int = 0
    _tracked: int = 0
    _tracked_settled: int = 0
    _pending: list[tuple[bytes, Future[RecordMetadata]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, value: bytes, future: Future[RecordMetadata]) -> None:
        """Track a producer future; its outcome is filed as soon as it settles."""
        with self._lock:
            self._pending.append((value, future))
            self._tracked += 1
        future.add_done_callback(lambda f: self._settled(value, f))

    def _settled(self, value: bytes, future: Future[RecordMetadata]) -> None:
        error = future.exception()
        if error is None:
            meta = future.result()
            self.ack(value, meta.partition, meta.offset)
        else:
            self.failed(value, f"{type(error).__name__}: {str(error)[-160:]}")
        with self._lock:
            self._tracked_settled += 1

    def ack(self, value: bytes, partition: int, offset: int) -> None:
        with self._lock:
            self.acknowledged[value] = (partition, offset)
            self._acks += 1

    def failed(self, value: bytes, error: str) -> None:
        with self._lock:
            self.unacknowledged.add(value)
            self.errors[error] += 1
            self._failures += 1

    def probe(self, value: bytes) -> None:
        """File a hand-made request's value whatever its answer (see ``probes``)."""
        with self._lock:
            self.probes.add(value)

    def settle(self, timeout_s: float = 120) -> None:
        """Wait until every tracked future has settled (and so has been filed)."""
        with self._lock:
            pending, self._pending = self._pending, []
        concurrent.futures.wait([f for _, f in pending], timeout=timeout_s)
        stuck = [v for v, f in pending if not f.done()]
        assert not stuck, f"{len(stuck)} sends never settled, e.g. {stuck[:3]}"

    @property
    def acknowledgements(self) -> int:
        """Acknowledgements received so far (a value acknowledged twice counts twice)."""
        with self._lock:
            return self._acks

    def mark(self) -> int:
        """The moment a fault ends, for ``check``'s count of acknowledgements after it."""
        return self.acknowledgements

    @property
    def settled(self) -> int:
        """Sends settled so far, acknowledged or failed: only for pacing a load."""
        with self._lock:
            return self._acks + self._failures

    @property
    def unsettled(self) -> int:
        """Tracked producer sends started whose outcome has not arrived yet."""
        with self._lock:
            return self._tracked - self._tracked_settled


@dataclass(frozen=True)
class Found:
    """Every record stored in a topic: value -> the (partition, offset)s holding it."""

    where: dict[bytes, list[tuple[int, int]]]
    offsets: dict[int, list[int]]

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.where.values())


def read_topic(root: RootSpec, topic: str) -> Found:
    """Read a whole topic straight from the storage root (no broker involved)."""
    catalog = Catalog(root.url, s3=root.s3)
    try:
        log = catalog.topic(topic)
        log.refresh()
        where: dict[bytes, list[tuple[int, int]]] = {}
        offsets: dict[int, list[int]] = {}
        for partition in range(log.num_partitions):
            offset = log.log_start_offset(partition)
            hwm = log.high_watermark(partition)
            offsets[partition] = []
            while offset < hwm:
                batch = log.read(partition, offset, max_records=10_000, max_bytes=64 << 20)
                for row_offset, value in zip(
                    batch.records.column("offset").to_pylist(),
                    batch.records.column("value").to_pylist(),
                    strict=True,
                ):
                    where.setdefault(value, []).append((partition, row_offset))
                    offsets[partition].append(row_offset)
                offset = batch.next_offset
        return Found(where, offsets)
    finally:
        catalog.close()


@dataclass(frozen=True)
class Summary:
    name: str
    acknowledged: int
    found: int
    lost: int
    duplicated: int
    #: Duplicates of values every attempt of which was acknowledged: never allowed.
    duplicated_unexplained: int
    strangers: int
    #: Values sent by the producers (probes aside) that no attempt got acknowledged.
    never_acknowledged: int
    #: Acknowledgements received after the fault ended (None: no such moment given).
    acknowledged_after_fault: int | None

    def line(self) -> str:
        after = (
            ""
            if self.acknowledged_after_fault is None
            else f" acknowledged_after_fault={self.acknowledged_after_fault}"
        )
        return (
            f"FAULT {self.name}: acknowledged={self.acknowledged} found={self.found} "
            f"lost={self.lost} duplicated={self.duplicated} "
            f"(never_acknowledged={self.never_acknowledged}){after}"
        )


def summarise(name: str, ledger: Ledger, found: Found, recovered: int | None = None) -> Summary:
    lost = [v for v, at in ledger.acknowledged.items() if at not in found.where.get(v, [])]
    duplicates = [v for v, places in found.where.items() if len(places) > 1]
    sent = set(ledger.acknowledged) | ledger.unacknowledged | ledger.probes
    return Summary(
        name=name,
        acknowledged=len(ledger.acknowledged),
        found=found.count,
        lost=len(lost),
        duplicated=len(duplicates),
        duplicated_unexplained=sum(1 for v in duplicates if v not in ledger.unacknowledged),
        strangers=sum(1 for v in found.where if v not in sent),
        never_acknowledged=len(ledger.unacknowledged - set(ledger.acknowledged) - ledger.probes),
        acknowledged_after_fault=None if recovered is None else ledger.acknowledgements - recovered,
    )


def check(
    name: str,
    root: RootSpec,
    topic: str,
    ledger: Ledger,
    *,
    idempotent: bool,
    recovered: int,
    min_acknowledged_after: int,
) -> Summary:
    """Print the summary line and assert the guarantees (see the module docstring).

    ``recovered`` is ``ledger.mark()`` taken when the fault ended (the last
    kill, the store back): at least ``min_acknowledged_after`` acknowledgements
    must have arrived since, or "nothing acknowledged was lost" would also hold
    for a broker that never accepted another record.
    """
    ledger.settle()
    found = read_topic(root, topic)
    summary = summarise(name, ledger, found, recovered)
    print(summary.line(), flush=True)
    if ledger.errors:
        print(f"  errors of unacknowledged attempts: {ledger.errors.most_common(3)}", flush=True)
    assert summary.lost == 0, summary.line()
    assert summary.strangers == 0, summary.line()
    assert summary.acknowledged_after_fault is not None
    assert summary.acknowledged_after_fault >= min_acknowledged_after, (
        f"{summary.line()}: fewer than {min_acknowledged_after} acknowledgements after the fault"
    )
    if idempotent:
        assert summary.duplicated == 0, summary.line()
        # An idempotent producer retries until delivery_timeout_ms: a send that never
        # got through means the broker did not recover in time.
        assert summary.never_acknowledged == 0, summary.line()
    else:
        assert summary.duplicated_unexplained == 0, summary.line()
    for partition, offsets in found.offsets.items():
        assert_dense(partition, offsets)
    return summary


def assert_dense(partition: int, offsets: Iterable[int]) -> None:
    listed = list(offsets)
    if listed:
        expected = list(range(listed[0], listed[0] + len(listed)))
        assert listed == expected, f"partition {partition}: offsets not dense"
