"""Hostile input, generated: no 5xx, the broker stays up, refused requests change nothing.

tests/server/test_bad_input.py pins one precise error per hand-written case and
tests/server/test_openapi_fuzz.py fuzzes from the OpenAPI document; this file
generates what neither reaches: byte-level garbage as JSON and as Arrow IPC
(including mutations of valid streams), base64 that is not, huge header
lists, deeply nested JSON values, offsets and partitions at and past the
integer limits, and topic and group names made of path characters (``../``,
``%2e%2e``, NUL, slashes, unicode). Every answer must be below 500 and a JSON
error; after every refused request the stored files are byte-for-byte what
they were (``RootSnapshots`` of tests/fixtures/snapshots.py); and nothing is ever created
outside the storage root, whatever the request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots
from tests.server.test_bad_input import ARROW, arrow_body

EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),  # one broker serves every example, on purpose
    database=None,
)


class Hostile:
    """A broker over a local root holding a topic, and the checks every answer must pass."""

    def __init__(self, tmp_path: Path, broker: BrokerProcess) -> None:
        self.tmp_path = tmp_path
        self.root = RootSpec(str(tmp_path / "root"))
        self.broker = broker
        self.snapshots = RootSnapshots(self.root)
        self.http = httpx.Client(base_url=broker.url, timeout=60)
        self.http.post("/v1/topics", json={"name": "t", "partitions": 2}).raise_for_status()
        self.http.post(
            "/v1/topics/t/records", json={"records": [{"value": f"v{i}"} for i in range(4)]}
        ).raise_for_status()
        self.outside = self.outside_root()
        self.refresh()
        self.answers = 0

    def outside_root(self) -> set[str]:
        """Everything under the test's directory that is neither the root nor a broker log."""
        return {
            str(p.relative_to(self.tmp_path))
            for p in self.tmp_path.rglob("*")
            if not str(p.relative_to(self.tmp_path)).startswith("root")
            and not p.name.endswith(".log")
        }

    def refresh(self) -> None:
        self.before = self.snapshots.take()

    def check(self, response: httpx.Response) -> None:
        context = f"{response.request.method} {response.request.url}: {response.text[:300]}"
        assert response.status_code < 500, context
        assert self.broker.process.poll() is None, f"broker died on {context}"
        assert self.outside_root() == self.outside, f"a file appeared outside the root: {context}"
        if response.status_code >= 400:
            body = response.json()
            assert isinstance(body.get("error_code"), int) and body.get("message"), context
            assert self.snapshots.take() == self.before, f"stored files changed by {context}"
        else:
            self.refresh()
        self.answers += 1


@pytest.fixture
def hostile(tmp_path: Path, start_broker: Callable[..., BrokerProcess]) -> Iterator[Hostile]:
    broker = start_broker(
        RootSpec(str(tmp_path / "root")),
        fetch_max_wait_ms=10,
        linger_ms=1,
        max_request_bytes=1 << 20,
        heartbeat_interval_ms=60_000,
    )
    checks = Hostile(tmp_path, broker)
    yield checks
    checks.http.close()
    assert "Traceback" not in broker.log(), broker.log()[-3000:]


JSON_TYPE = {"content-type": "application/json"}


def test_garbage_json_and_bad_base64(hostile: Hostile) -> None:
    @EXAMPLES
    @given(
        body=st.one_of(
            st.binary(max_size=300),
            st.text(max_size=200).map(str.encode),
            st.sampled_from([b"{", b"[", b'{"records": [', b"\xff\xfe{}", b'{"records": null}']),
        ),
        path=st.sampled_from(["/v1/topics/t/records", "/v1/topics", "/v1/groups/g/offsets"]),
    )
    def json_garbage(body: bytes, path: str) -> None:
        hostile.check(hostile.http.post(path, content=body, headers=JSON_TYPE))

    @EXAMPLES
    @given(value=st.text(max_size=60), key=st.text(max_size=20))
    def base64(value: str, key: str) -> None:
        body = {
            "records": [{"value": value, "key": key}],
            "value_format": "base64",
            "key_format": "base64",
        }
        hostile.check(hostile.http.post("/v1/topics/t/records", json=body))

    json_garbage()
    base64()


def test_huge_headers_and_deep_nesting(hostile: Hostile) -> None:
    @EXAMPLES
    @given(
        count=st.integers(0, 5_000),
        size=st.integers(0, 300_000),
        http_header=st.integers(0, 200_000),
    )
    def headers(count: int, size: int, http_header: int) -> None:
        record = {
            "value": "x",
            "headers": [{"key": f"h{i}", "value": "y"} for i in range(count)]
            + [{"key": "big", "value": "z" * size}],
        }
        try:
            answer = hostile.http.post(
                "/v1/topics/t/records",
                json={"records": [record]},
                headers={"x-hostile": "a" * http_header},
            )
        except httpx.RemoteProtocolError:
            # uvicorn drops a connection whose header block is over its limit before any
            # route runs; what matters is that the broker survives and nothing changed.
            assert http_header > 16_000
            assert hostile.broker.process.poll() is None
            assert hostile.snapshots.take() == hostile.before
            return
        hostile.check(answer)

    @EXAMPLES
    @given(depth=st.integers(1, 200_000), kind=st.sampled_from(["[", '{"a":']))
    def nesting(depth: int, kind: str) -> None:
        closing = "]" if kind == "[" else "}"
        value = kind * depth + "1" + closing * depth
        body = (
            '{"value_format": "json", "key_format": "json", "records": [{"value": '
            + value
            + ', "key": '
            + value
            + "}]}"
        ).encode()
        hostile.check(hostile.http.post("/v1/topics/t/records", content=body, headers=JSON_TYPE))
        nested = ("[" * depth + "]" * depth).encode()
        hostile.check(hostile.http.post("/v1/topics", content=nested, headers=JSON_TYPE))

    headers()
    nesting()


def test_malformed_arrow_ipc(hostile: Hostile) -> None:
    valid = arrow_body(pa.table({"value": pa.array([b"a", b"b", b"c"] * 20, pa.binary())}))

    @EXAMPLES
    @given(
        data=st.one_of(
            st.binary(max_size=2_000),
            st.tuples(st.integers(0, len(valid)), st.binary(min_size=1, max_size=8)).map(
                lambda cut: valid[: cut[0]] + cut[1] + valid[cut[0] + len(cut[1]) :]
            ),
            st.integers(0, len(valid)).map(lambda n: valid[:n]),
        )
    )
    def arrow(data: bytes) -> None:
        answer = hostile.http.post(
            "/v1/topics/t/records", content=data, headers={"content-type": ARROW}
        )
        hostile.check(answer)

    arrow()


def test_offsets_and_partitions_past_the_limits(hostile: Hostile) -> None:
    extremes = st.one_of(
        st.integers(-(2**70), 2**70),
        st.sampled_from([2**31, 2**31 - 1, 2**63, 2**63 - 1, -(2**63), -1, 2**64]),
        st.sampled_from(["1e9", "0x10", " 1", "1.0", "NaN", "-0", "٣"]),
    )

    @EXAMPLES
    @given(partition=extremes, offset=extremes, max_records=extremes)
    def fetch(partition: Any, offset: Any, max_records: Any) -> None:
        hostile.check(
            hostile.http.get(
                f"/v1/topics/t/partitions/{quote(str(partition), safe='')}/records",
                params={"offset": offset, "max_records": max_records},
            )
        )

    @EXAMPLES
    @given(partition=extremes, offset=extremes)
    def produce_and_commit(partition: Any, offset: Any) -> None:
        hostile.check(
            hostile.http.post(
                "/v1/topics/t/records", json={"records": [{"value": "x", "partition": partition}]}
            )
        )
        hostile.check(
            hostile.http.post(
                "/v1/groups/g/offsets",
                json={"offsets": [{"topic": "t", "partition": partition, "offset": offset}]},
            )
        )

    fetch()
    produce_and_commit()


PATHY = st.one_of(
    st.sampled_from(
        [
            "..",
            "../x",
            "../../etc/passwd",
            "%2e%2e",
            "%2e%2e%2fx",
            "a/../../b",
            "/abs",
            "a\x00b",
            "..\\x",
            "_meta",
            "topics",
            ".",
            "a/b",
            "\u202e",
            "\ufb01",
            "\uff41",
        ]
    ),
    st.text(alphabet=st.sampled_from("./\\%2e\x00aé_-"), min_size=1, max_size=12),
    st.text(max_size=20),
)


def test_path_characters_in_topic_and_group_names(hostile: Hostile) -> None:
    @EXAMPLES
    @given(name=PATHY, raw=st.booleans())
    def names(name: str, raw: bool) -> None:
        # Both percent-encoded (slashes arrive inside one segment) and as typed.
        segment = name if raw and "\x00" not in name and "?" not in name else quote(name, safe="")
        for method, path, body in (
            ("POST", "/v1/topics", {"name": name, "partitions": 1}),
            ("POST", f"/v1/topics/{segment}/records", {"records": [{"value": "x"}]}),
            ("GET", f"/v1/topics/{segment}/partitions/0/records", None),
            ("DELETE", f"/v1/topics/{segment}", None),
            ("POST", f"/v1/groups/{segment}/offsets", {"offsets": []}),
            ("GET", f"/v1/groups/{segment}/offsets", None),
            ("DELETE", f"/v1/groups/{segment}", None),
        ):
            try:
                answer = hostile.http.request(method, path, json=body)
            except httpx.InvalidURL:
                continue  # the client refuses to send it: nothing to check
            if answer.status_code == 201 or (method == "DELETE" and answer.status_code < 300):
                # A valid name: the topic was created (or deleted) inside the root.
                assert hostile.outside_root() == hostile.outside
                hostile.refresh()
                continue
            hostile.check(answer)

    names()
    # "t" itself survived everything (names that look like it never touched it).
    assert hostile.http.get("/v1/topics/t").status_code == 200
