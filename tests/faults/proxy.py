"""A small TCP proxy between a broker and the object store, to cut or slow the store.

Stopping the proxy closes its listening socket and every open connection, so the
broker sees what it would see when the store is down (connection refused and
reset); starting it again listens on the same port, so the broker reconnects
without being told anything. ``latency_s`` delays every chunk forwarded in
either direction, which is how "slow storage" is injected. moto keeps its
objects in memory, so the store itself is never restarted: its data survive
the outage exactly as a real store's would.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``; ``stop``/``start`` cut and restore it."""

    def __init__(self, target_host: str, target_port: int, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.latency_s = 0.0
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self.port = port
        self.connections = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accept_thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accept_thread.start()

    def stop(self) -> None:
        """Refuse new connections and reset the open ones, as a store going down does."""
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
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()

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
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.latency_s:
                    time.sleep(self.latency_s)
                dst.sendall(data)
        except OSError:
            pass  # the other side (or stop()) closed the connection: the pipe is done
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with self._lock:
                    self._sockets.discard(sock)
