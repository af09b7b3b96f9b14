"""Plain HTTP producers for the fault tests: one attempt per request, outcomes into a ledger.

Unlike the client library these are not idempotent: a request that got no
answer and is sent again may be stored twice, which the ledger allows only
for records with such an unanswered attempt. Refused requests (429, 503) are
retried with the same records, as a Kafka client retries retriable errors.

A producer thread that fails (a non-retriable refusal, a request refused on
every attempt) fails ``run`` with its exception: an assertion raised in a
thread and left there would only be a warning, and the test would pass.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.faults.ledger import Ledger


def padded(value: str, size: int) -> str:
    return value + "x" * max(0, size - len(value))


class HttpProducers:
    """``threads`` threads each sending ``requests`` requests of ``records`` records."""

    def __init__(
        self,
        url: str,
        topic: str,
        ledger: Ledger,
        *,
        threads: int,
        requests: int,
        records: int,
        record_bytes: int,
        attempts: int = 200,
        backoff_s: float = 0.05,
        on_answer: Callable[[], None] | None = None,
    ) -> None:
        self.url = url
        self.topic = topic
        self.ledger = ledger
        self.shape = (threads, requests, records, record_bytes)
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.on_answer = on_answer
        self.statuses: Counter[int] = Counter()
        self.error_names: Counter[str] = Counter()
        self.offered_bytes = 0
        self._lock = threading.Lock()
        self._failed = threading.Event()

    def run(self) -> None:
        """Send everything; raises the first producer thread's exception, if any."""
        threads = self.shape[0]
        with ThreadPoolExecutor(threads, thread_name_prefix=f"http-producer-{self.topic}") as pool:
            running = [pool.submit(self._thread, t) for t in range(threads)]
            try:
                for future in running:
                    future.result()
            finally:
                self._failed.set()  # the other threads stop at their next request

    def _thread(self, t: int) -> None:
        _, requests, records, record_bytes = self.shape
        try:
            with httpx.Client(base_url=self.url, timeout=60) as http:
                for r in range(requests):
                    if self._failed.is_set():
                        return
                    prefix = f"{self.topic}-{t}-{r}"
                    values = [padded(f"{prefix}-{i}-", record_bytes) for i in range(records)]
                    self._send(http, values)
        except BaseException:
            self._failed.set()
            raise

    def _send(self, http: httpx.Client, values: list[str]) -> None:
        body = {"records": [{"value": v} for v in values]}
        for _ in range(self.attempts):
            if self._failed.is_set():
                return
            with self._lock:
                self.offered_bytes += sum(len(v) for v in values)
            try:
                answer = http.post(f"/v1/topics/{self.topic}/records", json=body)
            except httpx.HTTPError as exc:
                self._record(0, type(exc).__name__)
                for v in values:
                    self.ledger.failed(v.encode(), type(exc).__name__)
                continue
            payload = answer.json()
            if answer.status_code == 200:
                self._record(200, "")
                for v, at in zip(values, payload["records"], strict=True):
                    self.ledger.ack(v.encode(), at["partition"], at["offset"])
                return
            self._record(answer.status_code, payload.get("error", "?"))
            if not payload.get("retriable"):
                raise AssertionError(f"non-retriable refusal under fault: {answer.text}")
            # Refused before anything was written: nothing of it can be stored.
            for v in values:
                self.ledger.failed(v.encode(), payload["error"])
            time.sleep(self.backoff_s)
        raise AssertionError(f"request still refused after {self.attempts} attempts")

    def _record(self, status: int, name: str) -> None:
        with self._lock:
            self.statuses[status] += 1
            if name:
                self.error_names[name] += 1
        if self.on_answer is not None:
            self.on_answer()
