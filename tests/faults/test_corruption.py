"""A corrupt or truncated Parquet segment and a corrupt Delta log entry.

Files are damaged behind the brokers' back (as bit rot or a broken copy
would), then a fresh broker serves the root. A fetch touching the damaged
segment gets CORRUPT_MESSAGE naming the file and its partition; the other
partitions, and appends to every partition, keep working. A garbage commit
file makes its topic fail with a message naming that commit; other topics
keep working. Acknowledged records outside the damage are all still there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.faults.ledger import Ledger, check
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("make_root", ["local"], indirect=True)]


def produce(
    http: httpx.Client,
    topic: str,
    partition: int,
    n: int,
    tag: str = "",
    ledger: Ledger | None = None,
) -> list[int]:
    """Append ``n`` records, filing their acknowledgements in ``ledger`` if given."""
    records = [{"value": f"{topic}-{partition}-{i}{tag}", "partition": partition} for i in range(n)]
    answer = http.post(f"/v1/topics/{topic}/records", json={"records": records})
    assert answer.status_code == 200, answer.text
    placed = answer.json()["records"]
    if ledger is not None:
        for record, at in zip(records, placed, strict=True):
            ledger.ack(str(record["value"]).encode(), at["partition"], at["offset"])
    return [r["offset"] for r in placed]


def fetch(http: httpx.Client, topic: str, partition: int) -> httpx.Response:
    return http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params={"offset": 0})


def values(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [r["value"] for r in answer.json()["records"]]


def test_corrupt_segment_and_corrupt_commit(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    ledger = Ledger()  # what was acknowledged for topic "other", checked at the end
    first = start_broker(root)
    with httpx.Client(base_url=first.url, timeout=30) as http:
        for topic in ("damaged", "other", "badlog"):
            http.post("/v1/topics", json={"name": topic, "partitions": 3}).raise_for_status()
            for p in range(3):
                produce(http, topic, p, 5, ledger=ledger if topic == "other" else None)
    first.stop()

    base = Path(root.url)
    truncated = next(base.glob("topics/damaged/*/partition=1/*.parquet"))
    truncated.write_bytes(truncated.read_bytes()[:40])
    log_dir = next(base.glob("topics/badlog/*/_delta_log"))
    versions = sorted(log_dir.glob("*.json"))
    garbage = log_dir / f"{len(versions):020d}.json"
    garbage.write_bytes(b'{"add": {"path": "partition=0/x.parquet", "si')

    broker = start_broker(root)
    damaged = ledger.mark()
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        broken = fetch(http, "damaged", 1)
        print(f"corrupt segment: HTTP {broken.status_code} {broken.text[:300]}")
        body = broken.json()
        assert body["error"] == "CORRUPT_MESSAGE", body
        assert truncated.name in body["message"] and "partition=1" in body["message"], body
        assert "damaged" in body["message"], body
        for p in (0, 2):
            assert values(fetch(http, "damaged", p)) == [f"damaged-{p}-{i}" for i in range(5)]
        for p in range(3):
            assert produce(http, "damaged", p, 2) == [5, 6]
        # Past the damaged segment, partition 1 reads again.
        later = http.get("/v1/topics/damaged/partitions/1/records", params={"offset": 5})
        assert values(later) == ["damaged-1-0", "damaged-1-1"]

        bad_log = fetch(http, "badlog", 0)
        print(f"corrupt commit: HTTP {bad_log.status_code} {bad_log.text[:300]}")
        body = bad_log.json()
        assert body["error"] == "CORRUPT_MESSAGE", body
        assert f"commit {len(versions)}" in body["message"] and "badlog" in body["message"], body
        for p in range(3):
            assert values(fetch(http, "other", p)) == [f"other-{p}-{i}" for i in range(5)]
            assert produce(http, "other", p, 1, tag="-after", ledger=ledger) == [5]
    assert broker.process.poll() is None
    check(
        "corruption-other-topic",
        root,
        "other",
        ledger,
        idempotent=True,
        recovered=damaged,
        min_acknowledged_after=3,
    )
