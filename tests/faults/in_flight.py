"""Produce requests on the wire, per broker: proof that a kill cut a request.

A broker killed between two requests tests no crash recovery at all: every
request got its answer. Wrapped around a producer's connection, this
transport knows which produce requests each broker has received and not yet
answered, and how each of them ended, so a kill test can kill a broker while
it holds a request and then see that the request lost its answer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import httpx


def broker_of(url: httpx.URL) -> str:
    """A request's broker as the base URL the fixtures name brokers by."""
    return f"{url.scheme}://{url.host}:{url.port}"


class InFlightTransport(httpx.BaseTransport):
    """httpx's transport, counting ``POST .../records`` requests until their answer arrives."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self._lock = threading.Lock()
        self._next_id = 0
        self._open: dict[int, str] = {}
        self._cut: set[int] = set()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/records"):
            return self._inner.handle_request(request)
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
            self._open[request_id] = broker_of(request.url)
        try:
            # A broker answers a produce only once its commit is durable, headers and
            # body together: returning here means the answer arrived.
            return self._inner.handle_request(request)
        except httpx.TransportError:
            with self._lock:
                self._cut.add(request_id)
            raise
        finally:
            with self._lock:
                del self._open[request_id]

    def in_flight(self, broker: str | None = None) -> frozenset[int]:
        """Requests sent and not answered yet, to ``broker`` (a base URL) or to any."""
        with self._lock:
            return frozenset(i for i, b in self._open.items() if broker in (None, b))

    def busiest(self) -> str | None:
        """The broker holding the most unanswered requests (None if none holds any)."""
        with self._lock:
            brokers = list(self._open.values())
        return max(set(brokers), key=brokers.count) if brokers else None

    def cut(self, requests: Iterable[int]) -> frozenset[int]:
        """Those of ``requests`` that ended without an answer (the connection failed)."""
        with self._lock:
            return frozenset(i for i in requests if i in self._cut)

    def settled(self, requests: Iterable[int]) -> bool:
        """True once none of ``requests`` is still waiting for its answer."""
        with self._lock:
            return not any(i in self._open for i in requests)

    def close(self) -> None:
        self._inner.close()
