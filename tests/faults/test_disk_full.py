"""A local root whose disk fills up: clear retriable errors, no loss, recovery when space returns.

The root is a 4 MiB tmpfs. After a first batch of records, a filler file takes
every remaining byte; producers keep sending and get 503 KAFKA_STORAGE_ERROR
(retriable, the message naming the device error) while nothing is written,
and the broker keeps serving reads. Deleting the filler returns the space:
the same broker process commits the retried requests. Nothing acknowledged is
lost; every stored record is one that was sent.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.faults.http_load import HttpProducers
from tests.faults.ledger import Ledger, check
from tests.faults.load import wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = [pytest.mark.slow]


def fill(path: Path) -> int:
    """Write ``path`` until the device is full; returns the bytes written."""
    written = 0
    with path.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
                written += 65536
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return written


def test_disk_full_then_space_returns(
    small_disk: Path, start_broker: Callable[..., BrokerProcess]
) -> None:
    root = RootSpec(str(small_disk / "root"))
    broker = start_broker(root, linger_ms=2, heartbeat_interval_ms=60_000, checkpoint_interval=0)
    http = httpx.Client(base_url=broker.url, timeout=60)
    http.post("/v1/topics", json={"name": "full", "partitions": 2}).raise_for_status()
    ledger = Ledger()
    HttpProducers(
        broker.url, "full", ledger, threads=1, requests=5, records=10, record_bytes=200
    ).run()
    filler = small_disk / "filler"
    print(f"filler took {fill(filler)} bytes")

    refused = threading.Event()
    load = HttpProducers(
        broker.url,
        "full",
        ledger,
        threads=2,
        requests=10,
        records=20,
        record_bytes=2_000,
        backoff_s=0.1,
        on_answer=lambda: refused.set() if load.error_names["KAFKA_STORAGE_ERROR"] else None,
    )
    with ThreadPoolExecutor(1, thread_name_prefix="disk-full-load") as pool:
        sender = pool.submit(load.run)
        wait_for(lambda: refused.is_set() or sender.done(), "a refusal while the disk is full")
        assert refused.is_set(), f"the load ended without a refusal: {sender.exception()!r}"
        answer = http.post("/v1/topics/full/records", json={"records": [{"value": "probe"}]})
        ledger.probe(b"probe")
        # Reads keep working while writes cannot.
        fetch = http.get("/v1/topics/full/partitions/0/records", params={"offset": 0})
        space_returned = ledger.mark()
        filler.unlink()
        # The producers' own assertions (no non-retriable refusal, no request refused
        # for good) fail the test here.
        sender.result(timeout=120)
    http.close()
    print(f"disk full: answers {dict(load.statuses)}, errors {dict(load.error_names)}")
    print(f"disk full probe: HTTP {answer.status_code} {answer.text[:300]}")
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["error"] == "KAFKA_STORAGE_ERROR" and body["retriable"] is True, body
    assert "no space left" in body["message"].lower(), body
    assert fetch.status_code == 200, fetch.text
    assert broker.process.poll() is None, "the broker died when the disk filled"
    assert not list(small_disk.rglob(".tmp-*")), "failed writes left temporary files"
    check(
        "disk-full",
        root,
        "full",
        ledger,
        idempotent=False,
        recovered=space_returned,
        # Every thread was stuck on a refused request: at least those get through.
        min_acknowledged_after=load.shape[0] * load.shape[2],
    )
