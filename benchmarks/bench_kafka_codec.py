"""Kafka protocol codecs: the libraries that could encode and decode the Kafka listener's bytes.

The Kafka listener needs two codecs, chosen by measurement among maintained
libraries: one for request and response messages, one for RecordBatch v2
(the records inside Produce requests and Fetch responses). Every library is
fed the same bytes in the same run, and its output is checked against the
others before it is timed, so a fast but wrong codec shows up as a note.

* messages (microseconds per message, lower is better): decode and encode
  of a Produce v9 request and a Fetch v12 response carrying ``partitions``
  batches of ``records`` records each (the batches are opaque bytes at this
  layer), and of a Metadata v12 response for ``metadata_topics`` topics of
  ``metadata_partitions`` partitions on three brokers. The ``lakelog``
  column is kio (the message codec lakelog uses); kafka-python's
  JSON-schema message classes are the baseline. aiokafka's message classes
  stop below these versions (see the coverage table), so they are not timed.
* record batches (microseconds per record, lower is better): encode
  ``records`` records (10-byte key, ``value_bytes``-byte JSON-like value, no
  headers) into one batch, and decode such a batch (CRC checked, every
  record's offset, timestamp, key, value and headers read), uncompressed
  and with each codec. The ``lakelog`` column is aiokafka's compiled codec;
  kafka-python's pure-Python codec and kio's reader/writer are the
  baselines where they can (kio has no compression; kafka-python needs
  python-snappy, lz4 and zstandard for those codecs, used only if installed).
* fetch encode (microseconds per record, lower is better): segment rows
  (the Arrow table a Fetch reads from storage: ``fetch_batches`` records,
  no headers, then the same rows with two headers each) encoded into a
  Fetch answer's RecordBatch v2 by the broker's column-wise encoder
  (``server.kafka.records.encode_fetch``). Baseline: the same rows turned
  into Python objects and appended one by one to aiokafka's builder
  (``benchmarks.per_record_fetch_encoder``, the broker's previous encoder);
  the two must write the same bytes.
* coverage: the request versions each library can encode and decode for the
  APIs the listener answers, printed as a table in the notes.

Each figure is the median of ``rounds`` rounds of back-to-back calls, one
round lasting about ``seconds / rounds``; results are not kept between calls.
"""

from __future__ import annotations

import datetime
import functools
import importlib
import io
import os
import pkgutil
import re
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, RecordHeader
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_batch
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch_v12
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v12 import response as metadata_v12
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import Records, TZAwareMicros, i8, i16, i32, i32Timedelta, i64

from benchmarks.common import Progress, Report, Result, config_for, load_note, median, render_table
from benchmarks.per_record_fetch_encoder import encode_fetch_per_record
from lakelog.records import CREATE_TIME, SEGMENT_SCHEMA, TIMESTAMP_TYPE
from server.kafka.records import encode_fetch

NAME = "kafka-codec"
DESCRIPTION = "Kafka message and RecordBatch v2 codecs: kio, aiokafka, kafka-python"

MESSAGES = "Kafka messages"
RECORDS = "RecordBatch v2"
FETCH_ENCODE = "Fetch encode, segment rows to RecordBatch v2"

KIO = "kio"
AIOKAFKA = "aiokafka"
KAFKA_PYTHON = "kafka-python"
LAKELOG = "lakelog"
PER_RECORD = "per-record aiokafka builder"

#: RecordBatch attributes' compression codes, as Kafka numbers them.
COMPRESSION = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: The APIs the Kafka listener answers, with their API keys, in the table's order.
LISTENER_APIS: tuple[tuple[str, int], ...] = (
    ("ApiVersions", 18),
    ("Metadata", 3),
    ("Produce", 0),
    ("Fetch", 1),
    ("ListOffsets", 2),
    ("FindCoordinator", 10),
    ("JoinGroup", 11),
    ("SyncGroup", 14),
    ("Heartbeat", 12),
    ("LeaveGroup", 13),
    ("OffsetCommit", 8),
    ("OffsetFetch", 9),
    ("DescribeGroups", 15),
    ("ListGroups", 16),
    ("DeleteGroups", 42),
    ("CreateTopics", 19),
    ("DeleteTopics", 20),
    ("CreatePartitions", 37),
    ("DescribeConfigs", 32),
    ("IncrementalAlterConfigs", 44),
    ("DescribeCluster", 60),
    ("InitProducerId", 22),
    ("SaslHandshake", 17),
    ("SaslAuthenticate", 36),
)

BASE_TIMESTAMP_MS = 1_767_225_600_123  # 2026-01-01T00:00:00.123Z: milliseconds matter


@dataclass(frozen=True)
class CodecBenchConfig:
    """How much to measure; ``CONFIGS`` holds the named sizes."""

    partitions: int = 6
    records: int = 1_000
    value_bytes: int = 100
    metadata_topics: int = 20
    metadata_partitions: int = 6
    #: segment rows per Fetch encode: the codec batch, and a 1 MiB partition answer of 100 B values
    fetch_batches: tuple[int, ...] = (1_000, 8_000)
    #: wall time spent on each figure, split over ``rounds`` rounds
    seconds: float = 0.8
    rounds: int = 5
    seed: int = 0


CONFIGS: dict[str, CodecBenchConfig] = {
    "tiny": CodecBenchConfig(
        partitions=2,
        records=20,
        metadata_topics=2,
        metadata_partitions=2,
        fetch_batches=(20,),
        seconds=0.02,
        rounds=2,
    ),
    "small": CodecBenchConfig(),
    "large": CodecBenchConfig(seconds=3.0, rounds=9),
}


# -- timing ------------------------------------------------------------------


def per_call(fn: Callable[[], object], seconds: float, rounds: int) -> float:
    """Median seconds per call of ``fn`` over ``rounds`` rounds of back-to-back calls."""
    fn()  # warm caches and lazily built codec tables
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(seconds / rounds / once))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return median(samples)


# -- record batches ----------------------------------------------------------

Headers = tuple[tuple[str, bytes | None], ...]
#: One record as every codec is checked on: (offset, timestamp ms, key, value, headers).
Row = tuple[int, int, bytes | None, bytes | None, Headers]


def make_rows(cfg: CodecBenchConfig, rng: np.random.Generator) -> list[Row]:
    """JSON-like values (some repetition, as real events have) padded with random hex."""
    rows: list[Row] = []
    for i in range(cfg.records):
        text = (
            f'{{"user":"user-{int(rng.integers(10_000)):05d}","event":"page_view","seq":{i},"pad":"'
        )
        pad = rng.bytes(cfg.value_bytes).hex()[: max(0, cfg.value_bytes - len(text) - 2)]
        value = (text + pad + '"}').encode()[: cfg.value_bytes]
        rows.append((i, BASE_TIMESTAMP_MS + i, f"key-{i % 1000:06d}".encode(), value, ()))
    return rows


def _aiokafka_records() -> Any:
    from aiokafka.record import default_records

    return default_records


def _kafka_python_records() -> Any:
    from kafka.record import default_records

    return default_records


def build_batch(module: Any, codec: int, rows: Sequence[Row]) -> bytes:
    """A batch built with aiokafka's or kafka-python's builder (the same interface)."""
    builder = module.DefaultRecordBatchBuilder(2, codec, 0, 1_000, 0, 0, 2**30)
    for offset, timestamp, key, value, headers in rows:
        builder.append(offset, timestamp, key, value, list(headers))
    return bytes(builder.build())


def read_rows(module: Any, data: bytes) -> list[Row]:
    """Every record of a batch read with aiokafka's or kafka-python's reader, CRC checked."""
    batch = module.DefaultRecordBatch(data)
    if not batch.validate_crc():
        raise ValueError("record batch CRC mismatch")
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


def kio_build_batch(rows: Sequence[Row]) -> bytes:
    records = tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(
                datetime.datetime.fromtimestamp(timestamp / 1000, datetime.UTC)
            ),
            offset=i64(offset),
            key=key,
            value=value,
            headers=tuple(RecordHeader(key=k.encode(), value=v) for k, v in headers),
        )
        for offset, timestamp, key, value, headers in rows
    )
    batch = NewRecordBatch(
        producer_id=i64(1_000),
        producer_epoch=i16(0),
        base_sequence=i32(0),
        records=records,
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_batch(buffer, batch)
    return buffer.getvalue()


def kio_read_rows(data: bytes) -> list[Row]:
    batch, _ = read_batch(data, 0)
    return [
        (
            r.offset,
            round(r.timestamp.timestamp() * 1000),
            r.key,
            r.value,
            tuple(((h.key or b"").decode(), h.value) for h in r.headers),
        )
        for r in batch.records
    ]


@dataclass(frozen=True)
class RecordCodec:
    """One library's RecordBatch v2 encoder and decoder for one compression codec."""

    library: str
    encode: Callable[[Sequence[Row]], bytes]
    decode: Callable[[bytes], list[Row]]


def record_codecs(compression: str) -> tuple[list[RecordCodec], list[str]]:
    """The codecs that handle ``compression``, aiokafka first, and why the others do not."""
    code = COMPRESSION[compression]
    aio, kp = _aiokafka_records(), _kafka_python_records()
    codecs = [
        RecordCodec(
            AIOKAFKA, lambda rows: build_batch(aio, code, rows), lambda d: read_rows(aio, d)
        )
    ]
    missing: list[str] = []
    if _kafka_python_has(compression):
        codecs.append(
            RecordCodec(
                KAFKA_PYTHON, lambda rows: build_batch(kp, code, rows), lambda d: read_rows(kp, d)
            )
        )
    else:
        missing.append(f"{KAFKA_PYTHON} {compression}: its codec package is not installed")
    if compression == "none":
        codecs.append(RecordCodec(KIO, kio_build_batch, kio_read_rows))
    else:
        missing.append(f"{KIO} {compression}: kio reads and writes uncompressed batches only")
    return codecs, missing


def _kafka_python_has(compression: str) -> bool:
    from kafka import codec

    checks: dict[str, Callable[[], bool]] = {
        "none": lambda: True,
        "gzip": codec.has_gzip,
        "snappy": codec.has_snappy,
        "lz4": codec.has_lz4,
        "zstd": codec.has_zstd,
    }
    return bool(checks[compression]())


def check_record_codec(codec: RecordCodec, rows: Sequence[Row], reference: bytes) -> list[str]:
    """What the codec gets wrong: reading the reference batch, and its own batch read back."""
    problems = []
    try:
        decoded = codec.decode(reference)
        if decoded != list(rows):
            problems.append(
                f"{codec.library} decodes records that differ from those encoded; "
                + _first_difference(decoded, rows)
            )
    except Exception as exc:  # reported as a finding of the run, never swallowed
        problems.append(f"{codec.library} cannot decode the batch: {exc!r}")
    try:
        own = read_rows(_aiokafka_records(), codec.encode(rows))
        if own != list(rows):
            problems.append(
                f"{codec.library}'s batch reads back (aiokafka) as different records; "
                + _first_difference(own, rows)
            )
    except Exception as exc:
        problems.append(f"{codec.library} cannot encode the batch: {exc!r}")
    return problems


def _first_difference(decoded: Sequence[Row], rows: Sequence[Row]) -> str:
    for got, want in zip(decoded, rows, strict=False):
        if got != want:
            return f"first: {got[:2]} instead of {want[:2]} (offset, timestamp ms)"
    return f"{len(decoded)} records instead of {len(rows)}"


def measure_records(
    cfg: CodecBenchConfig, rows: Sequence[Row], report: Report, progress: Progress
) -> None:
    for compression in COMPRESSION:
        codecs, missing = record_codecs(compression)
        report.notes.extend(f"not measured: {m}" for m in missing)
        reference = codecs[0].encode(rows)
        for codec in codecs:
            problems = check_record_codec(codec, rows, reference)
            report.notes.extend(f"CHECK FAILED ({compression}): {p}" for p in problems)
        for operation in ("decode", "encode"):
            figures: dict[str, float] = {}
            for codec in codecs:
                progress(f"records {compression} {operation} {codec.library}")
                call = (
                    functools.partial(codec.decode, reference)
                    if operation == "decode"
                    else functools.partial(codec.encode, rows)
                )
                figures[codec.library] = per_call(call, cfg.seconds, cfg.rounds) / len(rows) * 1e6
            report.add(
                Result(
                    RECORDS,
                    f"{compression}, {len(rows):,} records of {cfg.value_bytes} B",
                    operation,
                    figures.pop(AIOKAFKA),
                    "us/record",
                    baselines=figures,
                    higher_is_better=False,
                    params={
                        "compression": compression,
                        "records": len(rows),
                        "value_bytes": cfg.value_bytes,
                        "batch_bytes": len(reference),
                    },
                )
            )


def segment_table(cfg: CodecBenchConfig, count: int, headers: bool) -> pa.Table:
    """``count`` rows as a segment read holds them: the codec rows repeated, offsets and all."""
    rows = make_rows(replace(cfg, records=count), np.random.default_rng(cfg.seed))
    header_rows = [{"key": "trace", "value": b"0123456789abcdef"}, {"key": "kind", "value": None}]
    return pa.table(
        {
            "offset": [r[0] for r in rows],
            "timestamp": pa.array([r[1] for r in rows], pa.int64()).cast(TIMESTAMP_TYPE),
            "timestamp_type": [CREATE_TIME] * count,
            "key": [r[2] for r in rows],
            "value": [r[3] for r in rows],
            "headers": [header_rows if headers else [] for _ in rows],
            "producer_id": [None] * count,
            "sequence": [None] * count,
        },
        schema=SEGMENT_SCHEMA,
    )


def measure_fetch_encode(cfg: CodecBenchConfig, report: Report, progress: Progress) -> None:
    for count in cfg.fetch_batches:
        for headers in (False, True):
            table = segment_table(cfg, count, headers)
            with_headers = "2 headers" if headers else "no headers"
            label = f"{count:,} records of {cfg.value_bytes} B, {with_headers}"
            if encode_fetch(table) != encode_fetch_per_record(table):
                report.notes.append(f"CHECK FAILED (fetch encode, {label}): the bytes differ")
            figures = {}
            for name, encoder in ((LAKELOG, encode_fetch), (PER_RECORD, encode_fetch_per_record)):
                progress(f"fetch encode {label} {name}")
                call = functools.partial(encoder, table)
                figures[name] = per_call(call, cfg.seconds, cfg.rounds) / count * 1e6
            report.add(
                Result(
                    FETCH_ENCODE,
                    label,
                    "encode",
                    figures.pop(LAKELOG),
                    "us/record",
                    baselines=figures,
                    higher_is_better=False,
                    params={"records": count, "value_bytes": cfg.value_bytes, "headers": headers},
                )
            )


# -- messages ----------------------------------------------------------------


def produce_request(cfg: CodecBenchConfig, batch: bytes) -> produce_v9.ProduceRequest:
    partitions = tuple(
        produce_v9.PartitionProduceData(index=i32(p), records=Records(batch))
        for p in range(cfg.partitions)
    )
    return produce_v9.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            produce_v9.TopicProduceData(name=TopicName("events"), partition_data=partitions),
        ),
    )


def fetch_response(cfg: CodecBenchConfig, batch: bytes) -> fetch_v12.FetchResponse:
    partitions = tuple(
        fetch_v12.PartitionData(
            partition_index=i32(p),
            error_code=ErrorCode.none,
            high_watermark=i64(cfg.records),
            last_stable_offset=i64(cfg.records),
            log_start_offset=i64(0),
            aborted_transactions=None,
            records=Records(batch),
        )
        for p in range(cfg.partitions)
    )
    return fetch_v12.FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(
            fetch_v12.FetchableTopicResponse(topic=TopicName("events"), partitions=partitions),
        ),
    )


def metadata_response(cfg: CodecBenchConfig) -> metadata_v12.MetadataResponse:
    brokers = tuple(
        metadata_v12.MetadataResponseBroker(
            node_id=BrokerId(n), host=f"broker-{n}.lakelog.internal", port=i32(9092)
        )
        for n in range(3)
    )
    topics = tuple(
        metadata_v12.MetadataResponseTopic(
            error_code=ErrorCode.none,
            name=TopicName(f"topic-{t:03d}"),
            topic_id=uuid.UUID(int=t + 1),
            partitions=tuple(
                metadata_v12.MetadataResponsePartition(
                    error_code=ErrorCode.none,
                    partition_index=i32(p),
                    leader_id=BrokerId(p % 3),
                    leader_epoch=i32(0),
                    replica_nodes=(BrokerId(p % 3),),
                    isr_nodes=(BrokerId(p % 3),),
                )
                for p in range(cfg.metadata_partitions)
            ),
        )
        for t in range(cfg.metadata_topics)
    )
    return metadata_v12.MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=brokers,
        cluster_id="lakelog",
        controller_id=BrokerId(0),
        topics=topics,
    )


@dataclass(frozen=True)
class MessageCase:
    """One message: its kio entity, its bytes, and kafka-python's class for it."""

    label: str
    entity: Any
    version: int
    kafka_python: Any

    @property
    def kio_type(self) -> type[Any]:
        return type(self.entity)


def kio_encode(entity: Any) -> bytes:
    return kio_write(entity_writer(type(entity)), entity)


def kio_write(writer: Callable[[io.BytesIO, Any], None], entity: Any) -> bytes:
    buffer = io.BytesIO()
    writer(buffer, entity)
    return buffer.getvalue()


def kafka_python_message(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def message_cases(cfg: CodecBenchConfig, batch: bytes) -> list[MessageCase]:
    return [
        MessageCase(
            f"Produce v9 request, {cfg.partitions} x {cfg.records:,} records",
            produce_request(cfg, batch),
            9,
            kafka_python_message("kafka.protocol.producer.produce", "ProduceRequest"),
        ),
        MessageCase(
            f"Fetch v12 response, {cfg.partitions} x {cfg.records:,} records",
            fetch_response(cfg, batch),
            12,
            kafka_python_message("kafka.protocol.consumer.fetch", "FetchResponse"),
        ),
        MessageCase(
            f"Metadata v12 response, {cfg.metadata_topics} topics x "
            f"{cfg.metadata_partitions} partitions",
            metadata_response(cfg),
            12,
            kafka_python_message("kafka.protocol.metadata.metadata", "MetadataResponse"),
        ),
    ]


def check_message(case: MessageCase, wire: bytes) -> list[str]:
    """Each library must read the bytes back to the same message and write the same bytes."""
    problems = []
    decoded, size = entity_reader(case.kio_type)(wire, 0)
    if decoded != case.entity or size != len(wire):
        problems.append(f"kio does not read back {case.label} as written")
    try:
        again = case.kafka_python.decode(wire, version=case.version)
        if bytes(again.encode()) != wire:
            problems.append(f"kafka-python re-encodes {case.label} differently")
    except Exception as exc:  # reported as a finding of the run, never swallowed
        problems.append(f"kafka-python cannot decode {case.label}: {exc!r}")
    return problems


def measure_messages(
    cfg: CodecBenchConfig, batch: bytes, report: Report, progress: Progress
) -> None:
    for case in message_cases(cfg, batch):
        wire = kio_encode(case.entity)
        report.notes.extend(f"CHECK FAILED: {p}" for p in check_message(case, wire))
        reader = entity_reader(case.kio_type)
        writer = entity_writer(case.kio_type)
        kp_message = case.kafka_python.decode(wire, version=case.version)

        contenders: dict[str, dict[str, Callable[[], object]]] = {
            "decode": {
                KIO: functools.partial(reader, wire, 0),
                KAFKA_PYTHON: functools.partial(
                    case.kafka_python.decode, wire, version=case.version
                ),
            },
            "encode": {
                KIO: functools.partial(kio_write, writer, case.entity),
                KAFKA_PYTHON: kp_message.encode,
            },
        }
        for operation, fns in contenders.items():
            figures = {}
            for library, fn in fns.items():
                progress(f"{case.label} {operation} {library}")
                figures[library] = per_call(fn, cfg.seconds, cfg.rounds) * 1e6
            report.add(
                Result(
                    MESSAGES,
                    case.label,
                    operation,
                    figures.pop(KIO),
                    "us/message",
                    baselines=figures,
                    higher_is_better=False,
                    params={"bytes": len(wire), "version": case.version},
                )
            )


# -- coverage ----------------------------------------------------------------


def kio_versions() -> dict[int, list[int]]:
    by_name = {name: key for key, name in api_key_map.items()}
    return {
        by_name[name]: sorted(v for v, types in versions.items() if EntityType.request in types)
        for name, versions in schema_name_map.items()
        if name in by_name
    }


def kafka_python_versions() -> dict[int, list[int]]:
    """Request versions of kafka-python's JSON-schema messages (``kafka.protocol.old`` aside)."""
    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage

    found: dict[int, list[int]] = {}
    for module in _submodules(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in module or module.endswith("generate_stubs"):
            continue
        members: dict[str, Any] = vars(importlib.import_module(module))
        for value in members.values():
            if not (isinstance(value, type) and issubclass(value, ApiMessage)):
                continue
            message: Any = value  # kafka-python is untyped: its class attributes are Any
            if message is ApiMessage or getattr(message, "_class_version", 0) is not None:
                continue  # the base class, or a per-version alias of a message class
            if message.is_request():
                low, high = message.valid_versions
                found[int(message.API_KEY)] = list(range(low, high + 1))
    return found


def aiokafka_versions() -> dict[int, list[int]]:
    """Versions of aiokafka's ``<Name>Request_v<N>`` classes."""
    import aiokafka.protocol

    found: dict[int, set[int]] = {}
    for module in _submodules(aiokafka.protocol.__path__, "aiokafka.protocol."):
        for name, value in vars(importlib.import_module(module)).items():
            match = re.fullmatch(r"\w+Request_v(\d+)", name)
            key = getattr(value, "API_KEY", None)
            if match and isinstance(value, type) and isinstance(key, int):
                found.setdefault(key, set()).add(int(match.group(1)))
    return {key: sorted(versions) for key, versions in found.items()}


def _submodules(path: Iterable[str], prefix: str) -> list[str]:
    return [m.name for m in pkgutil.walk_packages(list(path), prefix)]


def format_versions(versions: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``; no versions -> ``-``."""
    if not versions:
        return "-"
    spans: list[list[int]] = []
    for v in sorted(versions):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def coverage_table() -> str:
    libraries = {
        KIO: kio_versions(),
        KAFKA_PYTHON: kafka_python_versions(),
        AIOKAFKA: aiokafka_versions(),
    }
    rows = [
        [f"{name} ({key})", *(format_versions(v.get(key, [])) for v in libraries.values())]
        for name, key in LISTENER_APIS
    ]
    table = render_table(["API (key)", *libraries], rows)
    return "request versions each library encodes and decodes:\n" + table


# -- the suite ---------------------------------------------------------------


def run(size: str, workdir: Path, progress: Progress) -> Report:
    """Every codec figure of one run; ``workdir`` is unused (nothing touches a disk)."""
    cfg = config_for(CONFIGS, size)
    load_before = os.getloadavg()[0]
    report = Report(NAME)
    rows = make_rows(cfg, np.random.default_rng(cfg.seed))
    batch = build_batch(_aiokafka_records(), COMPRESSION["none"], rows)
    measure_messages(cfg, batch, report, progress)
    measure_records(cfg, rows, report, progress)
    measure_fetch_encode(cfg, report, progress)
    report.notes.append(
        "lakelog column: kio for messages, aiokafka's compiled codec for record batches, "
        "the broker's column-wise encoder for Fetch; median of each figure's rounds, "
        "lower is better"
    )
    report.notes.append(coverage_table())
    report.notes.append(load_note(load_before, os.getloadavg()[0]))
    return report
