"""Client pieces that need no broker: wire formats, bootstrap parsing, errors, batching."""

from __future__ import annotations

import json
from concurrent.futures import Future

import httpx
import pyarrow as pa
import pyarrow.ipc
import pytest

from lakelog.client import Producer
from lakelog.client.accumulator import MAX_SEQUENCE, RecordAccumulator
from lakelog.client.batch import PendingRecord
from lakelog.client.connection import (
    Connection,
    error_from_response,
    parse_bootstrap,
    ssl_context,
    tls_verification,
)
from lakelog.client.errors import NetworkError
from lakelog.client.retry import Backoff, call_with_retries
from lakelog.client.structs import RecordMetadata
from lakelog.client.wire import ARROW_STREAM, decode_fetch, encode_produce
from lakelog.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaStorageError,
    LakelogError,
    OffsetOutOfRangeError,
    SchemaMismatchError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from lakelog.records import Record


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, http://b:2/ ,a:1") == ["http://a:1", "http://b:2"]
    assert parse_bootstrap(["https://c:3"]) == ["https://c:3"]
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")
    with pytest.raises(ValueError):
        parse_bootstrap("ftp://x:1")


def _response(status: int, body: object) -> httpx.Response:
    request = httpx.Request("GET", "http://b/v1/x")
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(status, content=content, request=request)


def test_error_bodies_become_their_kafka_classes() -> None:
    body = {
        "error_code": 1,
        "error": "OFFSET_OUT_OF_RANGE",
        "message": "offset 9 is out of range",
        "retriable": False,
        "details": {"log_start_offset": 0, "high_watermark": 3},
    }
    error = error_from_response(_response(416, body))
    assert isinstance(error, OffsetOutOfRangeError)
    assert error.details == {"log_start_offset": 0, "high_watermark": 3}
    assert not error.retriable
    storage = error_from_response(
        _response(503, {"error_code": 56, "error": "X", "message": "m", "retriable": True})
    )
    assert isinstance(storage, KafkaStorageError) and storage.retriable
    unknown = error_from_response(
        _response(400, {"error_code": 9999, "error": "NEW", "message": "m", "retriable": False})
    )
    assert type(unknown) is UnknownServerError and unknown.details["error_code"] == 9999
    proxy = error_from_response(_response(502, b"<html>bad gateway</html>"))
    assert isinstance(proxy, NetworkError) and proxy.retriable


def test_schema_mismatch_422_is_invalid_request() -> None:
    """The brokers answer a body that does not match its schema with 422 and INVALID_REQUEST
    (42); the client raises the same class as for any other INVALID_REQUEST, not retried."""
    body = _error(42, "INVALID_REQUEST")
    body["message"] = "invalid request: partitions: Input should be a valid integer"
    error = error_from_response(_response(422, body))
    assert type(error) is InvalidRequestError and not error.retriable
    assert "partitions" in error.message
    assert error_for_code(SchemaMismatchError.code) is InvalidRequestError


def _error(code: int, name: str, retriable: bool = False) -> dict[str, object]:
    return {"error_code": code, "error": name, "message": "m", "retriable": retriable}


def test_connection_fails_over_on_retriable_errors_only() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.host)
        if request.url.host == "a":
            raise httpx.ConnectError("refused", request=request)
        if request.url.host == "b":
            body = {
                "error_code": 56,
                "error": "KAFKA_STORAGE_ERROR",
                "message": "m",
                "retriable": True,
            }
            return httpx.Response(503, json=body)
        if request.url.path == "/v1/missing":
            body = {
                "error_code": 3,
                "error": "UNKNOWN_TOPIC_OR_PARTITION",
                "message": "m",
                "retriable": False,
            }
            return httpx.Response(404, json=body)
        return httpx.Response(200, json={"ok": True})

    with Connection("a:1,b:1,c:1", discover=False, transport=httpx.MockTransport(handler)) as conn:
        assert conn.get_json("/v1/x") == {"ok": True}
        assert seen == ["a", "b", "c"]
        assert conn.current == "http://c:1"
        seen.clear()
        with pytest.raises(UnknownTopicOrPartitionError):
            conn.request("GET", "/v1/missing")
        assert seen == ["c"], "a definitive 4xx is not worth asking other brokers"


def test_connection_raises_the_last_error_when_every_broker_fails() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with Connection("a:1,b:1", discover=False, transport=httpx.MockTransport(handler)) as conn:
        with pytest.raises(LakelogError) as info:
            conn.request("GET", "/v1/x")
        assert info.value.retriable and info.value.code == 7  # REQUEST_TIMED_OUT


def test_call_with_retries_stops_at_non_retriable() -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise NetworkError("down")
        return "ok"

    assert call_with_retries(flaky, backoff=Backoff(1, 2), timeout_ms=10_000) == "ok"

    def broken() -> str:
        attempts.append(1)
        raise UnknownTopicOrPartitionError("gone")

    attempts.clear()
    with pytest.raises(UnknownTopicOrPartitionError):
        call_with_retries(broken, backoff=Backoff(1, 2), timeout_ms=10_000)
    assert len(attempts) == 1


def test_backoff_grows_and_is_capped() -> None:
    backoff = Backoff(100, 1000, jitter=0)
    assert [backoff.delay_s(n) for n in (1, 2, 3, 4, 5, 9)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


RECORDS = [
    Record(value=b"\x00\xff", key=b"k", timestamp_ms=5, headers=(("h", b"\x01"), ("n", None))),
    Record(value=None, key=b"t", timestamp_ms=6, partition=2),
    Record(value=b"v", key=None, timestamp_ms=None),
]


def test_json_produce_body_carries_bytes_as_base64_and_the_sequence() -> None:
    encoded = encode_produce(RECORDS, "json", "all", producer_id=7, sequence=40)
    body = json.loads(encoded.body)
    assert encoded.params == {"acks": "all"}
    assert (body["producer_id"], body["sequence"]) == (7, 40)
    assert body["key_format"] == body["value_format"] == "base64"
    assert body["records"][0] == {
        "key": "aw==",
        "value": "AP8=",
        "timestamp_ms": 5,
        "headers": [{"key": "h", "value": "AQ=="}, {"key": "n", "value": None}],
    }
    assert body["records"][1]["partition"] == 2 and body["records"][1]["value"] is None


def test_arrow_produce_body_matches_the_broker_columns() -> None:
    encoded = encode_produce(RECORDS, "arrow", "1", producer_id=7, sequence=40)
    assert encoded.content_type == ARROW_STREAM
    assert encoded.params == {"acks": "1", "producer_id": 7, "sequence": 40}
    table = pyarrow.ipc.open_stream(pa.py_buffer(encoded.body)).read_all()
    assert table.column_names == ["partition", "timestamp", "key", "value", "headers"]
    assert table.column("partition").to_pylist() == [None, 2, None]
    assert table.column("value").to_pylist() == [b"\x00\xff", None, b"v"]
    assert table.column("headers").to_pylist()[0] == [
        {"key": "h", "value": b"\x01"},
        {"key": "n", "value": None},
    ]


def test_decode_json_fetch() -> None:
    body = {
        "topic": "t",
        "partition": 1,
        "high_watermark": 9,
        "log_start_offset": 0,
        "next_offset": 8,
        "records": [
            {
                "offset": 7,
                "timestamp_ms": 3,
                "timestamp_type": "LogAppendTime",
                "key": None,
                "value": "AP8=",
                "headers": [{"key": "h", "value": "AQ=="}],
            }
        ],
    }
    fetched = decode_fetch("t", 1, "application/json", {}, json.dumps(body).encode())
    (record,) = fetched.records
    assert (record.offset, record.timestamp_type, record.value) == (7, 1, b"\x00\xff")
    assert record.headers == [("h", b"\x01")]
    assert (fetched.high_watermark, fetched.next_offset) == (9, 8)


def _pending(size: int = 10, deadline: float = 1e12) -> PendingRecord:
    future: Future[RecordMetadata] = Future()
    return PendingRecord(Record(value=b"x"), future, size, deadline)


def _accumulator(**options: object) -> RecordAccumulator:
    settings: dict[str, object] = {
        "batch_size": 100,
        "linger_ms": 1_000_000,
        "max_request_size": 1_000,
        "buffer_memory": 10_000,
        "idempotent": True,
        "max_in_flight_per_topic": 1,
    }
    settings.update(options)
    return RecordAccumulator(**settings)  # type: ignore[arg-type]


def test_accumulator_batches_on_size_and_keeps_one_request_in_flight() -> None:
    ids = iter([11, 22])
    acc = _accumulator(id_source=lambda: next(ids))
    for _ in range(9):
        acc.append("t", _pending(), 1)
    with acc.cond:
        assert acc.drain(0.0)[0] == [], "under batch_size and lingering"
    acc.append("t", _pending(), 1)
    with acc.cond:
        (first,) = acc.drain(0.0)[0]
    assert (first.producer_id, first.base_sequence, len(first.records)) == (11, 0, 10)
    for _ in range(10):
        acc.append("t", _pending(), 1)
    with acc.cond:
        assert acc.drain(0.0)[0] == [], "the topic has a request in flight"
    acc.batch_done(first, failed=False)
    with acc.cond:
        (second,) = acc.drain(0.0)[0]
    assert (second.producer_id, second.base_sequence) == (11, 10)
    acc.batch_done(second, failed=True)  # outcome unknown: continue under a new id
    acc.append("t", _pending(), 1)
    acc.begin_flush()
    with acc.cond:
        (third,) = acc.drain(0.0)[0]
    assert (third.producer_id, third.base_sequence) == (22, 0)


def test_accumulator_splits_at_max_request_size_and_switches_id_before_sequence_wraps() -> None:
    ids = iter([1, 2])
    acc = _accumulator(id_source=lambda: next(ids), max_request_size=25)
    for _ in range(3):
        acc.append("t", _pending(), 1)
    acc.begin_flush()
    with acc.cond:
        (batch,) = acc.drain(0.0)[0]
    assert len(batch.records) == 2
    acc.batch_done(batch, failed=False)
    acc._topics["t"].next_sequence = MAX_SEQUENCE  # one sequence left, not enough for two
    acc.append("t", _pending(), 1)
    with acc.cond:
        (batch,) = acc.drain(0.0)[0]
    assert (batch.producer_id, batch.base_sequence, len(batch.records)) == (2, 0, 2)


def test_accumulator_blocks_then_refuses_when_the_buffer_is_full() -> None:
    acc = _accumulator(buffer_memory=15)
    acc.append("t", _pending(), 1)
    with pytest.raises(BufferError):
        acc.append("t", _pending(), 0.05)


def test_accumulator_expires_records_past_their_deadline() -> None:
    acc = _accumulator()
    late, fresh = _pending(deadline=5.0), _pending(deadline=50.0)
    acc.append("t", late, 1)
    acc.append("t", fresh, 1)
    with acc.cond:
        assert acc.expire(10.0) == [late]
        assert acc.next_deadline() == 50.0


def test_producer_refuses_bad_settings_and_records() -> None:
    with pytest.raises(ValueError, match="acks"):
        Producer("b:1", acks=1, enable_idempotence=True)
    with pytest.raises(ValueError, match="one request in flight"):
        Producer("b:1", max_in_flight_requests_per_topic=2)
    with pytest.raises(ValueError, match="delivery_timeout_ms"):
        Producer("b:1", delivery_timeout_ms=1_000, request_timeout_ms=5_000)
    with pytest.raises(ValueError):
        Producer("b:1", acks="most")
    with Producer("b:1", acks=1) as producer:
        assert not producer.enable_idempotence  # defaults to off when acks is not "all"
        with pytest.raises(TypeError, match="serializer"):
            producer.send("t", 12345)
        with pytest.raises(ValueError, match="timestamp_ms"):
            producer.send("t", b"x", timestamp_ms=-1)
        with pytest.raises(ValueError, match="partition"):
            producer.send("t", b"x", partition=-1)


def test_tls_files_that_cannot_be_loaded_are_named_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LAKELOG_SSL_CAFILE", "LAKELOG_SSL_CLIENT_CERTFILE", "LAKELOG_SSL_CLIENT_KEYFILE"):
        monkeypatch.delenv(name, raising=False)
    assert tls_verification(None) is True  # nothing configured: the system CAs
    with pytest.raises(InvalidConfigError, match="without ssl_certfile"):
        tls_verification(None, keyfile="client.key")
    with pytest.raises(InvalidConfigError, match=r"missing-ca\.pem"):
        tls_verification("/nonexistent/missing-ca.pem")
    with pytest.raises(InvalidConfigError, match="for calling other brokers"):
        ssl_context(["/nonexistent/a.pem"], trust_system=True, purpose=" for calling other brokers")
