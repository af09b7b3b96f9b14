"""A small TCP proxy between brokers and the object store, to cut, slow or watch the store.

``stop``/``start`` take the store down and up on the same port (moto keeps its data);
``latency_s`` delays every chunk, ``request_delay_s`` each HTTP request once, as a
distant store's round trip would; ``drop_response_to`` loses an answer, as when a
commit PUT landed while the writer got an error.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

#: The start of an HTTP/1.x request: method, target, version.
REQUEST_LINE = re.compile(rb"^[A-Z]+ \S+ HTTP/1\.[01]\r\n")
#: The longest request line a drop pattern is looked for in.
_LONGEST_LINE = 4096


def _reset(sock: socket.socket) -> None:
    """Close a connection now: the shutdown wakes a pipe thread blocked in ``recv``, which
    ``close`` alone would not, and tells the peer at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@dataclass
class _Connection:
    """One client connection: whether the answer to its current request is to be dropped."""

    client: socket.socket
    upstream: socket.socket
    #: The request line whose answer must not reach the client (None: pass answers on).
    dropping: bytes | None = None
    #: The last bytes the client sent, to find a request line split between two reads.
    recent: bytes = field(default=b"")
    #: The ``count_requests`` patterns the request waiting for its answer matched.
    counted: list[bytes] = field(default_factory=list)


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; ``stop``/``start`` cut and restore it."""

    def __init__(self, target_host: str, target_port: int, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.latency_s = 0.0
        #: Added once to each request from the client (see the module docstring).
        self.request_delay_s = 0.0
        #: Requests that were held back by ``request_delay_s`` before being forwarded.
        self.delayed_requests = 0
        #: Requests whose request line matched a pattern of ``count_requests``, per pattern.
        self.counts: Counter[bytes] = Counter()
        #: Answers to those requests, per (pattern, HTTP status).
        self.answers: Counter[tuple[bytes, int]] = Counter()
        self._counted: list[re.Pattern[bytes]] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        #: False from the moment ``stop`` begins: no byte is forwarded after that, also on
        #: connections not yet reset (a client's retry on a pooled connection included).
        self._running = False
        self.port = port
        self.connections = 0
        #: Request lines whose answers were dropped, in order.
        self.dropped: list[bytes] = []
        self._drop_pattern: re.Pattern[bytes] | None = None
        self._stop_after_drop = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop_response_to(self, pattern: bytes, *, then_stop: bool = False) -> None:
        """Forward the next request whose request line matches ``pattern`` but reset the
        client instead of answering (``then_stop``: stop the proxy too)."""
        with self._lock:
            self._drop_pattern = re.compile(pattern)
            self._stop_after_drop = then_stop

    def count_requests(self, pattern: bytes) -> None:
        """Count from now on the requests whose request line matches ``pattern`` (in
        ``counts[pattern]``) and their final answers (``answers[(pattern, status)]``)."""
        with self._lock:
            self._counted.append(re.compile(pattern))
            self.counts[pattern] += 0

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._running = True
        self._accept_thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accept_thread.start()

    def stop(self) -> None:
        """Refuse new connections and reset the open ones, as a store going down does."""
        self._running = False
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _reset(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed by stop()
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
                self.connections += 1
            connection = _Connection(client, upstream)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pipe, args=(src, dst, connection), daemon=True
                ).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, connection: _Connection) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data or not self._running:
                    break
                if self.latency_s:
                    time.sleep(self.latency_s)
                if src is connection.client:
                    if REQUEST_LINE.match(data):
                        connection.counted = self._count(data)
                        if self.request_delay_s:
                            time.sleep(self.request_delay_s)
                            with self._lock:
                                self.delayed_requests += 1
                    # Armed before the request is forwarded, so before its answer can come.
                    self._arm(connection, data)
                else:
                    final = data.startswith(b"HTTP/1.") and data[9:12] != b"100"
                    if connection.counted and final:
                        self._answered(connection, data)
                    if connection.dropping is not None and not data.startswith(b"HTTP/1.1 100"):
                        self._drop(connection)
                        break
                dst.sendall(data)
        except OSError:
            pass  # the other side (or stop()) closed the connection: the pipe is done
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with self._lock:
                    self._sockets.discard(sock)

    def _count(self, data: bytes) -> list[bytes]:
        """Count a request by the patterns its request line matches; returns those patterns."""
        line = data.split(b"\r\n", 1)[0]
        matched = []
        with self._lock:
            for pattern in self._counted:
                if pattern.search(line):
                    self.counts[pattern.pattern] += 1
                    matched.append(pattern.pattern)
        return matched

    def _answered(self, connection: _Connection, data: bytes) -> None:
        """Count the final answer (status line) to a counted request."""
        try:
            status = int(data[9:12])
        except ValueError:
            status = 0  # not a status line we understand: counted apart
        with self._lock:
            for pattern in connection.counted:
                self.answers[(pattern, status)] += 1
        connection.counted = []

    def _arm(self, connection: _Connection, data: bytes) -> None:
        """Mark the connection if ``data`` starts the request whose answer is to be dropped."""
        connection.recent = (connection.recent + data)[-8192:]
        # Only a line that ends in this chunk: an earlier request's line, still in
        # ``recent``, must not arm the drop for whatever the connection sends next
        # (nor hide a later line of this chunk by matching first).
        boundary = len(connection.recent) - len(data)
        since = max(0, boundary - _LONGEST_LINE)
        with self._lock:
            pattern = self._drop_pattern
            matches = pattern.finditer(connection.recent, since) if pattern is not None else ()
            found = next((m for m in matches if m.end() > boundary), None)
            if found is not None:
                self._drop_pattern = None  # one answer only
                connection.dropping = found.group(0)

    def _drop(self, connection: _Connection) -> None:
        """Lose the answer: reset the client's connection, the answer left unread."""
        assert connection.dropping is not None
        with self._lock:
            self.dropped.append(connection.dropping)
            stop = self._stop_after_drop
        if stop:
            self.stop()
            return
        for sock in (connection.client, connection.upstream):
            _reset(sock)
