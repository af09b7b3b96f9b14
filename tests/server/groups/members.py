"""A consumer-group member driven over raw HTTP, step by step (no client library).

Tests decide when each member joins, heartbeats or commits, so every
rebalance they assert on is one they caused.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from lakelog.testing.brokers import wait_for

#: Errors a member retries after a short backoff (the coordinator is moving).
RETRIABLE = {"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}
POOL = ThreadPoolExecutor(max_workers=8)


@dataclass
class Member:
    url: str
    group: str
    topics: list[str]
    client_id: str = "c"
    protocols: list[str] = field(default_factory=lambda: ["range"])
    session_timeout_ms: int = 2_000
    rebalance_timeout_ms: int = 20_000
    member_id: str = ""
    generation_id: int = -1
    assignment: set[tuple[str, int]] = field(default_factory=set)

    def _post(self, path: str, body: dict[str, Any], timeout: float = 10.0) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/groups/{self.group}{path}", json=body, timeout=timeout)

    def join(self, deadline_s: float = 60.0) -> dict[str, Any]:
        """Join until assigned (two-step join; retries while the coordinator moves)."""
        deadline = time.monotonic() + deadline_s
        while True:
            body = {
                "member_id": self.member_id,
                "client_id": self.client_id,
                "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "protocols": self.protocols,
                "topics": self.topics,
                "owned": [{"topic": t, "partition": p} for t, p in sorted(self.assignment)],
            }
            try:
                answer = self._post("/members", body, timeout=self.rebalance_timeout_ms / 1000 + 30)
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 200:
                obj: dict[str, Any] = answer.json()
                self.member_id = obj["member_id"]
                self.generation_id = obj["generation_id"]
                self.assignment = {(a["topic"], a["partition"]) for a in obj["assignment"]}
                return obj
            error = answer.json()["error"] if answer is not None else "COORDINATOR_NOT_AVAILABLE"
            if answer is not None and error == "MEMBER_ID_REQUIRED":
                self.member_id = answer.json()["details"]["member_id"]
                continue
            if error == "UNKNOWN_MEMBER_ID":
                self.member_id = ""
                continue
            if error not in RETRIABLE | {"REBALANCE_IN_PROGRESS"} or time.monotonic() > deadline:
                raise AssertionError(f"join failed: {answer.status_code if answer else ''} {error}")
            time.sleep(0.2)

    def join_async(self) -> Future[dict[str, Any]]:
        return POOL.submit(self.join)

    def heartbeat(self) -> str | None:
        """None when all is well, else the error name."""
        try:
            answer = self._post(
                f"/members/{self.member_id}/heartbeat", {"generation_id": self.generation_id}
            )
        except httpx.TransportError:
            return "COORDINATOR_NOT_AVAILABLE"
        if answer.status_code == 200:
            return None
        return str(answer.json()["error"])

    def heartbeat_until_error(self, timeout_s: float = 30.0, interval_s: float = 0.2) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            error = self.heartbeat()
            if error is not None and error not in RETRIABLE:
                return error
            time.sleep(interval_s)
        raise AssertionError(f"member {self.member_id} saw no rebalance within {timeout_s}s")

    def commit(self, offsets: dict[tuple[str, int], int]) -> httpx.Response:
        return self._post(
            "/offsets",
            {
                "member_id": self.member_id,
                "generation_id": self.generation_id,
                "offsets": [
                    {"topic": t, "partition": p, "offset": o, "metadata": f"m{o}"}
                    for (t, p), o in sorted(offsets.items())
                ],
            },
        )

    def leave(self) -> httpx.Response:
        return httpx.delete(
            f"{self.url}/v1/groups/{self.group}/members/{self.member_id}", timeout=10
        )


def rejoin_all(members: list[Member], timeout_s: float = 120.0) -> None:
    """Every member rejoins at once, then acts as a client does until the group settles.

    Each member heartbeats after its join and rejoins whenever the coordinator
    answers that the group rebalances or no longer knows it, until every
    member's heartbeat succeeds in one generation. A member that merely waited
    after its join would be expelled after its session timeout whenever the
    other's join was late (a slow machine), and the two would go on completing
    alternate generations alone.
    """
    stop = threading.Event()
    #: The generation of each member's last successful heartbeat (None: not settled).
    settled: list[int | None] = [None] * len(members)
    failures: list[BaseException] = []

    def act(index: int, member: Member) -> None:
        try:
            member.join()
            while not stop.is_set():
                error = member.heartbeat()
                if error is None:
                    settled[index] = member.generation_id
                elif error not in RETRIABLE:
                    settled[index] = None
                    member.join()
                    continue
                stop.wait(0.1)
        except BaseException as exc:  # reported by the waiting test below
            failures.append(exc)
            stop.set()

    futures = [POOL.submit(act, i, m) for i, m in enumerate(members)]
    try:
        wait_for(
            lambda: bool(failures) or (None not in settled and len(set(settled)) == 1),
            "every member to heartbeat in one generation",
            timeout_s,
        )
    finally:
        stop.set()
        for future in futures:
            future.result(timeout=timeout_s)
    if failures:
        raise failures[0]


def fetch_offsets(url: str, group: str) -> dict[tuple[str, int], int]:
    answer = httpx.get(f"{url}/v1/groups/{group}/offsets", timeout=10)
    assert answer.status_code == 200, answer.text
    return {(o["topic"], o["partition"]): o["offset"] for o in answer.json()["offsets"]}


def create_topic(url: str, name: str, partitions: int) -> None:
    answer = httpx.post(
        f"{url}/v1/topics", json={"name": name, "partitions": partitions}, timeout=30
    )
    assert answer.status_code == 201, answer.text


def produce(url: str, topic: str, partition: int, count: int) -> None:
    records = [{"value": f"v{i}", "partition": partition} for i in range(count)]
    answer = httpx.post(f"{url}/v1/topics/{topic}/records", json={"records": records}, timeout=30)
    assert answer.status_code == 200, answer.text
