"""A broker is reachable from the moment it is in the registry, even on a slow store.

Clients learn of brokers from the registry (HTTP ``/v1/brokers``, Kafka
Metadata). A broker registers during its startup, and its startup goes on
after that (groups, security state) at the store's pace. Its sockets must
already listen then: a refused connection makes a client that has just
learned of the broker mark it failed. Here every
store request of the broker is delayed by the proxy, and the registry is
watched directly: the moment the broker's entry appears, its HTTP and Kafka
addresses must accept a connection, and the HTTP one must answer a request
sent on it once startup completes.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from urllib.parse import urlparse

import pytest

from lakelog.storage import Storage, join
from server.registry import BROKERS_DIR
from tests.faults.conftest import ProxiedRoot
from tests.fixtures.brokers import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.s3]

#: Added to every store request of the broker: its startup after registering takes
#: several such requests, so there is a window of a second or more to connect in.
STORE_DELAY_S = 0.3


def first_entry(storage: Storage, timeout_s: float) -> dict[str, object]:
    """The first broker entry to appear in the registry, read as soon as it is there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in storage.list_dir(BROKERS_DIR):
            if entry.path.endswith(".json"):
                return dict(
                    json.loads(storage.read_bytes(join(BROKERS_DIR, entry.path.split("/")[-1])))
                )
        time.sleep(0.005)
    raise AssertionError(f"no broker registered within {timeout_s} s")


def test_a_registered_broker_accepts_connections_while_it_starts(
    proxied_root: ProxiedRoot, start_broker: Callable[..., BrokerProcess]
) -> None:
    proxied_root.proxy.request_delay_s = STORE_DELAY_S
    storage = proxied_root.root.open()  # the test's own view, not delayed
    started: list[BrokerProcess] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            started.append(start_broker(proxied_root.root, **proxied_root.broker_settings))
        except BaseException as exc:  # reported by the test below
            failed.append(exc)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    entry = first_entry(storage, timeout_s=60)
    http = urlparse(str(entry["url"]))
    assert http.hostname is not None and http.port is not None
    kafka_host, kafka_port = str(entry["kafka"]["PLAINTEXT"]).rsplit(":", 1)  # type: ignore[index]
    with (
        socket.create_connection((http.hostname, http.port), timeout=5) as web,
        socket.create_connection((kafka_host, int(kafka_port)), timeout=5),
    ):
        # Still starting: the request is answered once the broker serves.
        assert not started, "the broker finished starting before its entry was read"
        web.sendall(b"GET /healthz HTTP/1.1\r\nHost: broker\r\nConnection: close\r\n\r\n")
        web.settimeout(60)
        answer = b""
        while chunk := web.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    starter.join(timeout=120)
    assert not failed, failed
    assert started and started[0].url == str(entry["url"])
