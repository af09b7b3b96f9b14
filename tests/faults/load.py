"""Producer load shared by the fault tests: a thread sending unique values into a ledger.

If the sending thread fails, the failure is raised where the test waits
(``wait_for`` with ``load=``) and when the load ends, never left in the thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lakelog.client import Producer
from tests.faults.ledger import Ledger


class ProducerLoad:
    """Sends ``<prefix>-<n>`` values through a real ``Producer`` until stopped."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        ledger: Ledger,
        prefix: str = "v",
        max_outstanding: int = 2_000,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.ledger = ledger
        self.prefix = prefix
        self.count = 0
        self.max_outstanding = max_outstanding
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._send_until_stopped()
        except BaseException as exc:  # raised again in the test's thread by check()
            self.error = exc

    def value(self, n: int) -> bytes:
        """The value of the ``n``-th send (counting from 0)."""
        return f"{self.prefix}-{n}".encode()

    def acknowledged(self, n: int) -> bool:
        """True once the ``n``-th send has been acknowledged."""
        return self.value(n) in self.ledger.acknowledged

    def check(self) -> None:
        """Raise the sending thread's exception, if it died of one."""
        if self.error is not None:
            raise AssertionError(f"the producer load failed: {self.error!r}") from self.error

    def _send_until_stopped(self) -> None:
        while not self._stop.is_set():
            value = self.value(self.count)
            key = f"k{self.count % 17}".encode()
            self.ledger.sent(value, self.producer.send(self.topic, value, key=key))
            self.count += 1
            # A steady stream, not a flood of futures the test could never settle.
            while self.ledger.unsettled > self.max_outstanding:
                if self._stop.wait(0.005):
                    return

    def __enter__(self) -> ProducerLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.check()


def wait_for(
    condition: Callable[[], bool],
    what: str,
    timeout_s: float = 60,
    state: Callable[[], str] = str,
    load: ProducerLoad | None = None,
) -> None:
    """Poll ``condition``; the timeout only turns a hang into a failure, it times nothing.

    With ``load``, a failure of its sending thread ends the wait at once.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if load is not None:
            load.check()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} {state()}")
        time.sleep(0.02)


def records_on_their_way(ledger: Ledger, load: ProducerLoad, timeout_s: float = 60) -> int:
    """The first non-zero count of unsettled sends, for a fault injected right after.

    A steady load still has instants with every send settled (the sending
    thread between two sends, a commit that just answered everything), and
    a fault injected then interrupts nothing.
    """
    deadline = time.monotonic() + timeout_s
    while (unsettled := ledger.unsettled) == 0:
        load.check()
        if time.monotonic() > deadline:
            raise AssertionError(f"no send was on its way in {timeout_s:g} s")
        time.sleep(0.001)
    return unsettled
