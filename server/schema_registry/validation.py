"""Validation on produce: a record's key or value is framed with a schema id registered
under its subject, and its payload decodes with that schema.

A broker runs the check on a worker thread before ``TopicLog.prepare`` takes its
findings, so decoding a batch does not hold up the event loop; an id not seen
yet is read from the registry there. Each id's schema, subjects and decoder are
cached: an id's schema never changes, so its decoder is kept for good; the
subjects an id is registered under change with registrations and deletes, so
they are read again after ``SUBJECTS_TTL_S``, and at once before a record is
refused for its subject.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakelog.errors import LakelogError, SchemaNotFoundError
from lakelog.topic_config import TOPIC_NAME_STRATEGY, TopicConfig
from server.schema_registry.formats import BatchCheck, Decoder, format_of
from server.schema_registry.framing import HEADER_SIZE, framed_ids, unframe
from server.schema_registry.protobuf import ProtobufSchema
from server.schema_registry.subjects import message_name, record_name, subject_for
from server.schema_registry.types import ParsedSchema

#: How long the subjects of an id are trusted before they are read again.
SUBJECTS_TTL_S = 1.0
#: How long an id the registry does not know stays unknown before it is asked again.
MISSING_TTL_S = 1.0


class SchemaSource(Protocol):
    """What validation reads from the Schema Registry."""

    def schema_by_id(self, schema_id: int) -> ParsedSchema: ...

    def versions_with_id(self, schema_id: int) -> list[tuple[str, int]]: ...


@dataclass
class _Known:
    """One id the registry answered for."""

    schema: ParsedSchema
    subjects: frozenset[str]
    checked_at: float
    record_name: str | None
    decoder: Decoder | None = None
    #: The format's whole-batch check, if it has one (then ``decoder`` explains what it flags).
    batch: BatchCheck | None = None
    #: Why no decoder could be built for the schema (then every payload is refused).
    broken: str | None = None


@dataclass
class _Missing:
    reason: str
    checked_at: float


class Problem(NamedTuple):
    """Why one record of a batch is refused: its place in the batch and the reason."""

    batch_index: int
    reason: str


class SchemaValidator:
    """Checks produce batches against the Schema Registry. Thread-safe."""

    def __init__(
        self,
        source: SchemaSource,
        *,
        subjects_ttl_s: float = SUBJECTS_TTL_S,
        missing_ttl_s: float = MISSING_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.subjects_ttl_s = subjects_ttl_s
        self.missing_ttl_s = missing_ttl_s
        self.clock = clock
        self._ids: dict[int, _Known | _Missing] = {}
        self._lock = threading.Lock()

    # -- the cache ----------------------------------------------------------------

    def _fresh(self, entry: _Known | _Missing | None, now: float) -> bool:
        if entry is None:
            return False
        if isinstance(entry, _Missing):
            return now - entry.checked_at < self.missing_ttl_s
        return now - entry.checked_at < self.subjects_ttl_s

    def _resolve(self, schema_id: int, *, again: bool = False) -> _Known | _Missing:
        """The registry's answer for an id: from memory while fresh (``again``: read anew)."""
        now = self.clock()
        entry = self._ids.get(schema_id)
        if not again and self._fresh(entry, now):
            assert entry is not None
            return entry
        try:
            schema = (
                entry.schema if isinstance(entry, _Known) else self.source.schema_by_id(schema_id)
            )
            subjects = frozenset(s for s, _ in self.source.versions_with_id(schema_id))
        except SchemaNotFoundError:
            subjects = frozenset()
            if not isinstance(entry, _Known):
                missing = _Missing(f"schema id {schema_id} is not registered", now)
                with self._lock:
                    self._ids[schema_id] = missing
                return missing
        if isinstance(entry, _Known):
            known = dataclasses.replace(entry, subjects=subjects, checked_at=now)
        else:
            known = _Known(schema, subjects, now, record_name(schema))
        with self._lock:
            self._ids[schema_id] = known
        return known

    def _decoder(self, known: _Known) -> Decoder | None:
        if known.decoder is None and known.broken is None:
            schema_format = format_of(known.schema.schema_type)
            try:
                known.decoder = schema_format.decoder(known.schema)
                known.batch = schema_format.batch_check(known.schema)
            except (LakelogError, ValueError, ImportError) as exc:
                known.broken = f"its {known.schema.schema_type} schema cannot decode: {exc}"
        return known.decoder

    # -- the check ----------------------------------------------------------------

    def check(
        self, topic: str, config: TopicConfig, keys: pa.ChunkedArray, values: pa.ChunkedArray
    ) -> list[Problem]:
        """Every refused record of a batch, in order; empty when all pass.

        A null value (a tombstone) or a null key has no payload to check and passes.
        """
        problems = self._check(topic, config, keys, values, in_memory=False)
        assert problems is not None
        return problems

    def check_in_memory(
        self, topic: str, config: TopicConfig, keys: pa.ChunkedArray, values: pa.ChunkedArray
    ) -> list[Problem] | None:
        """``check``, where it needs no registry read and no per-record decoding (every id
        fresh in memory, a whole-batch check for each); None where it does.

        Such a check is cheap enough for a broker to run where the request is, sparing a
        thread hop per request; others go to ``check`` on a worker.
        """
        return self._check(topic, config, keys, values, in_memory=True)

    def _check(
        self,
        topic: str,
        config: TopicConfig,
        keys: pa.ChunkedArray,
        values: pa.ChunkedArray,
        *,
        in_memory: bool,
    ) -> list[Problem] | None:
        problems: dict[int, str] = {}
        sides: list[tuple[bool, pa.ChunkedArray]] = []
        if config.get("confluent.key.schema.validation"):
            sides.append((True, keys))
        if config.get("confluent.value.schema.validation"):
            sides.append((False, values))
        for is_key, column in sides:
            strategy = str(
                config.get(
                    "confluent.key.subject.name.strategy"
                    if is_key
                    else "confluent.value.subject.name.strategy"
                )
            )
            found = self._check_column(topic, strategy, is_key, column, in_memory)
            if found is None:
                return None
            for index, reason in found:
                problems.setdefault(index, reason)
        return [Problem(i, problems[i]) for i in sorted(problems)]

    def _check_column(
        self, topic: str, strategy: str, is_key: bool, column: pa.ChunkedArray, in_memory: bool
    ) -> list[tuple[int, str]] | None:
        """Each id is judged once per batch (registered under the subject, a decoder);
        then every payload framed with an accepted id is decoded. None: ``in_memory`` and
        an id that is not."""
        side = "key" if is_key else "value"
        found: list[tuple[int, str]] = []
        base = 0
        for chunk in column.chunks:
            framing = _Framing.of(chunk)
            found.extend((base + index, f"{side}: {reason}") for index, reason in framing.bad)
            for schema_id, framed in framing.by_id().items():
                if in_memory and not self._in_memory(topic, strategy, is_key, schema_id):
                    return None
                for name, rows in self._by_record_name(strategy, schema_id, framing, framed):
                    verdict = self._judge(topic, strategy, is_key, schema_id, name)
                    if isinstance(verdict, str):
                        found.extend((base + i, f"{side}: {verdict}") for i in rows.tolist())
                        continue
                    for index, reason in framing.decode(rows, *verdict):
                        why = f"payload does not decode with schema id {schema_id}: {reason}"
                        found.append((base + index, f"{side}: {why}"))
            base += len(chunk)
        return found

    def _in_memory(self, topic: str, strategy: str, is_key: bool, schema_id: int) -> bool:
        """Whether ``_judge`` accepts the id without a registry read, with a batch check."""
        entry = self._ids.get(schema_id)
        if not isinstance(entry, _Known) or not self._fresh(entry, self.clock()):
            return False
        subject = subject_for(strategy, topic, is_key, entry.record_name)
        return subject in entry.subjects and entry.decoder is not None and entry.batch is not None

    def _by_record_name(
        self, strategy: str, schema_id: int, framing: _Framing, rows: npt.NDArray[np.int64]
    ) -> list[tuple[str | None, npt.NDArray[np.int64]]]:
        """Rows of one id by the record name their subject is taken from (None: the
        schema's). Protobuf records under a record name strategy are named by the message
        they hold, which may be any message of the file."""
        if strategy == TOPIC_NAME_STRATEGY:
            return [(None, rows)]
        entry = self._resolve(schema_id)
        native = entry.schema.native if isinstance(entry, _Known) else None
        if not isinstance(native, ProtobufSchema):
            return [(None, rows)]
        names = [
            message_name(native, framing.view[start + HEADER_SIZE : end])
            for start, end in zip(
                framing.starts[rows].tolist(), framing.ends[rows].tolist(), strict=True
            )
        ]
        named = np.array(names, dtype=object)
        return [(name, rows[named == name]) for name in dict.fromkeys(names)]

    def _judge(
        self, topic: str, strategy: str, is_key: bool, schema_id: int, name: str | None = None
    ) -> tuple[Decoder, BatchCheck | None] | str:
        """The decoding of an id the subject accepts, or why the subject refuses it;
        ``name``: the record's name, where it is not the schema's."""
        entry = self._resolve(schema_id)
        if isinstance(entry, _Missing):
            return entry.reason
        subject = subject_for(strategy, topic, is_key, name or entry.record_name)
        if subject is None:
            return (
                f"schema id {schema_id} has no record name, which "
                f"{strategy.rsplit('.', 1)[-1]} names the subject by"
            )
        if subject not in entry.subjects:
            # Registered under the subject since it was last read, maybe: read it again.
            entry = self._resolve(schema_id, again=True)
        if isinstance(entry, _Missing):
            return entry.reason
        if subject not in entry.subjects:
            under = ", ".join(sorted(entry.subjects)) or "no subject (deleted)"
            return (
                f"schema id {schema_id} is not registered under subject {subject!r} "
                f"(it is under {under})"
            )
        decoder = self._decoder(entry)
        if decoder is None:
            return f"schema id {schema_id}: {entry.broken}"
        return decoder, entry.batch


@dataclass
class _Framing:
    """One Arrow chunk's framing, read off its offsets and data buffers with numpy: the
    magic byte and id of a thousand records are checked at once, and each payload is
    a view of the data buffer, not a copy (``framing.unframe`` explains a bad one)."""

    view: memoryview
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]
    framed: npt.NDArray[np.int64]  # rows framed with magic byte 0 and an id
    ids: npt.NDArray[np.int64]  # their ids
    bad: list[tuple[int, str]]  # non-null rows that are not, and why

    @classmethod
    def of(cls, chunk: pa.Array) -> _Framing:
        n = len(chunk)
        if n == 0 or chunk.null_count == n:
            empty = np.zeros(0, np.int64)
            return cls(memoryview(b""), empty, empty, empty, empty, [])
        ids, payloads, ends = framed_ids(chunk)
        starts = payloads - HEADER_SIZE
        data_buffer = chunk.buffers()[2]
        view = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")
        valid = chunk.is_valid().to_numpy(zero_copy_only=False) if chunk.null_count else True
        bad = []
        for index in np.flatnonzero(valid & (ids < 0)).tolist():
            try:
                unframe(view[int(starts[index]) : int(ends[index])])
            except ValueError as exc:
                bad.append((index, str(exc)))
        rows = np.flatnonzero(ids >= 0)
        return cls(view, starts, ends, rows, ids[rows], bad)

    def by_id(self) -> dict[int, npt.NDArray[np.int64]]:
        return {int(i): self.framed[self.ids == i] for i in np.unique(self.ids)}

    def decode(
        self, rows: npt.NDArray[np.int64], decoder: Decoder, batch: BatchCheck | None = None
    ) -> list[tuple[int, str]]:
        """The rows whose payload ``decoder`` refuses, and why; with a ``batch`` check, only
        the rows it flags are given to ``decoder``."""
        if batch is not None and len(rows):
            rows = rows[batch(self.view, self.starts[rows] + HEADER_SIZE, self.ends[rows])]
        view, skip = self.view, HEADER_SIZE
        starts, ends = self.starts[rows].tolist(), self.ends[rows].tolist()
        refused = []
        for index, start, end in zip(rows.tolist(), starts, ends, strict=True):
            try:
                decoder(view[start + skip : end])
            except Exception as exc:  # any failure of a decoder: the payload does not fit
                refused.append((index, _short(exc)))
        return refused


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
