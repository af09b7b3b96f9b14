"""The Schema Registry service of a broker: what the HTTP routes and the produce path call.

State is the fold of the event log in the storage root (``store.SchemaLog``),
so every broker on a root answers the same once it has read the same events.
Every answer except a schema-id hit in memory first reads the log's next
events (one missing-object read when nothing changed), so a client reads what
it wrote through any broker. A schema id never changes meaning (ids are never
reused), which is why an id hit needs no refresh; an id miss refreshes once.
Parsed schemas are cached by id.

Methods are synchronous and thread-safe; only ``schema_by_id`` on a hit is
free of I/O and may run on an event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from lakelog.errors import (
    ConcurrentCommitError,
    IncompatibleSchemaError,
    InvalidSchemaError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
)
from lakelog.storage import Storage
from server.schema_registry import compatibility
from server.schema_registry.compatibility import CompatibilityLevel, Earlier
from server.schema_registry.formats import SchemaFormat, format_of
from server.schema_registry.state import (
    Event,
    Mode,
    RegistryState,
    StoredSchema,
    SubjectVersion,
    VersionSpec,
)
from server.schema_registry.store import SchemaLog
from server.schema_registry.types import ParsedSchema, SchemaReference, SchemaType

log = logging.getLogger(__name__)

T = TypeVar("T")
#: The default limit on a schema's text, in bytes of UTF-8.
DEFAULT_MAX_SCHEMA_BYTES = 1 << 20
WRITE_ATTEMPTS = 50


@dataclass(frozen=True, slots=True)
class RegisteredVersion:
    subject: str
    version: int
    schema_id: int
    schema: ParsedSchema
    deleted: bool


class SchemaRegistry:
    def __init__(
        self,
        storage: Storage,
        *,
        max_schema_bytes: int = DEFAULT_MAX_SCHEMA_BYTES,
        formats: Callable[[SchemaType], SchemaFormat] = format_of,
    ) -> None:
        self.log = SchemaLog(storage)
        self.max_schema_bytes = max_schema_bytes
        self._formats = formats
        self._state = RegistryState()
        self._lock = threading.RLock()
        #: Parsed schemas by id: the hot path of every schema'd produce and fetch.
        self._parsed: dict[int, ParsedSchema] = {}
        #: Answers rendered from a cached schema, keyed by their user; an entry is valid
        #: while its schema is still the one ``cached_schema`` returns.
        self.answers: dict[Hashable, tuple[ParsedSchema, bytes]] = {}

    # -- state -----------------------------------------------------------------

    def refresh(self) -> RegistryState:
        """Fold in the events other brokers wrote; the state after them."""
        with self._lock:
            for seq, event in self.log.read_after(self._state.seq):
                self._apply(seq, event)
            return self._state

    def _apply(self, seq: int, event: Event) -> None:
        self._state.apply(seq, event)
        if event.get("type") in ("delete_version", "delete_subject"):
            for schema_id in list(self._parsed):
                if self._state.schema(schema_id) is None:
                    del self._parsed[schema_id]

    def _write(self, decide: Callable[[RegistryState], tuple[Event | None, T]]) -> T:
        """Run ``decide`` on the current state and store its event as the next one.

        ``decide`` validates and may raise; it runs again on the newer state when
        another broker stored the next event first.
        """
        with self._lock:
            for _ in range(WRITE_ATTEMPTS):
                state = self.refresh()
                event, answer = decide(state)
                if event is None:
                    return answer
                seq = state.seq + 1
                if self.log.append(seq, event):
                    self._apply(seq, event)
                    return answer
                log.debug("schema registry event %d was taken by another broker; retrying", seq)
        raise ConcurrentCommitError(
            f"schema registry: gave up after {WRITE_ATTEMPTS} attempts; other writers kept winning"
        )

    # -- parsing ---------------------------------------------------------------

    def _format(self, schema_type: SchemaType) -> SchemaFormat:
        return self._formats(schema_type)

    def _parse(
        self,
        state: RegistryState,
        schema_type: SchemaType,
        text: str,
        references: Sequence[SchemaReference],
        *,
        normalize: bool = False,
    ) -> ParsedSchema:
        size = len(text.encode())
        if size > self.max_schema_bytes:
            raise InvalidSchemaError(
                f"Invalid schema: {size} bytes, more than the limit of {self.max_schema_bytes} "
                "bytes (setting schema_registry_max_schema_bytes)"
            )
        resolved = {}
        for ref in references:
            entry = state.version(ref.subject, ref.version, deleted=True)
            resolved[ref.name] = self._parsed_locked(state, entry.schema_id)
        try:
            parsed = self._format(schema_type).parse(text, resolved, normalize=normalize)
        except SchemaRegistryError:
            raise
        except Exception as exc:  # a library's own complaint about the text
            raise InvalidSchemaError(f"Invalid schema: {exc}") from None
        if parsed.references != tuple(references):
            parsed = ParsedSchema(
                parsed.schema_type, parsed.text, parsed.canonical, tuple(references), parsed.native
            )
        return parsed

    def _parsed_locked(self, state: RegistryState, schema_id: int) -> ParsedSchema:
        parsed = self._parsed.get(schema_id)
        if parsed is not None:
            return parsed
        stored = state.schema(schema_id)
        if stored is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        parsed = self._parse(state, stored.schema_type, stored.text, stored.references)
        self._parsed[schema_id] = parsed
        return parsed

    def _candidate(
        self,
        state: RegistryState,
        schema_type: SchemaType,
        text: str,
        references: Sequence[SchemaReference],
        normalize: bool,
    ) -> tuple[ParsedSchema, StoredSchema]:
        refs = tuple(state.resolve_reference(r) for r in references)
        parsed = self._parse(state, schema_type, text, refs, normalize=normalize)
        stored = StoredSchema(0, schema_type, parsed.text, parsed.canonical, refs)
        return parsed, stored

    def _registered(self, state: RegistryState, entry: SubjectVersion) -> RegisteredVersion:
        schema = self._parsed_locked(state, entry.schema_id)
        return RegisteredVersion(
            entry.subject, entry.version, entry.schema_id, schema, entry.deleted
        )

    # -- schemas ---------------------------------------------------------------

    def schema_by_id(self, schema_id: int) -> ParsedSchema:
        """The schema with that id: from memory on a hit, else after one refresh."""
        parsed = self._parsed.get(schema_id)
        if parsed is not None:
            return parsed
        with self._lock:
            return self._parsed_locked(self.refresh(), schema_id)

    def cached_schema(self, schema_id: int) -> ParsedSchema | None:
        """The parsed schema if it is in memory (no I/O, no locking); else None."""
        return self._parsed.get(schema_id)

    def register(
        self,
        subject: str,
        schema_type: SchemaType,
        text: str,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> int:
        """The schema's id under ``subject``, registering it as a new version if needed.

        ``schema_id`` and ``version`` may be given in IMPORT mode only. An
        incompatible schema is Confluent's 409, naming every problem found.
        """

        def decide(state: RegistryState) -> tuple[Event | None, int]:
            parsed, stored = self._candidate(state, schema_type, text, references, normalize)
            found = state.register_event(subject, stored, schema_id=schema_id, version=version)
            if isinstance(found, SubjectVersion):
                return None, found.schema_id
            if state.mode(subject) is not Mode.IMPORT:
                problems = self._incompatibilities(state, subject, parsed, None)
                if problems:
                    raise _incompatible(subject, problems)
            return found, int(found["id"])

        return self._write(decide)

    def _incompatibilities(
        self,
        state: RegistryState,
        subject: str,
        new: ParsedSchema,
        version: VersionSpec | None,
        level: CompatibilityLevel | None = None,
    ) -> list[str]:
        """Problems of ``new`` under the subject's level: against its live versions
        (``version`` None), or against one version in the level's directions."""
        level = level or state.compatibility(subject)
        if version is None:
            entries = state.live_versions(subject)
        else:
            entries = [state.version(subject, version)]
            if level.transitive:
                level = CompatibilityLevel(level.value.removesuffix("_TRANSITIVE"))
        earlier = [Earlier(e.version, self._parsed_locked(state, e.schema_id)) for e in entries]
        return compatibility.incompatibilities(self._format(new.schema_type), level, new, earlier)

    def check_compatibility(
        self,
        subject: str,
        version: VersionSpec | None,
        schema_type: SchemaType,
        text: str,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
    ) -> list[str]:
        """Why ``text`` could not follow ``version`` (None: every version the level
        checks) of ``subject``; empty if it could."""
        with self._lock:
            state = self.refresh()
            if version is not None:
                state.version(subject, version)
            parsed, _ = self._candidate(state, schema_type, text, references, normalize)
            return self._incompatibilities(state, subject, parsed, version)

    def lookup(
        self,
        subject: str,
        schema_type: SchemaType,
        text: str,
        references: Sequence[SchemaReference] = (),
        *,
        normalize: bool = False,
        deleted: bool = False,
    ) -> RegisteredVersion:
        """The subject's version holding this schema: 40401 or 40403 when there is none."""
        with self._lock:
            state = self.refresh()
            state.versions(subject, deleted=deleted)
            _, stored = self._candidate(state, schema_type, text, references, normalize)
            entry = state.find(subject, stored.identity, deleted=deleted)
            if entry is None:
                raise SchemaNotFoundError("Schema not found")
            return self._registered(state, entry)

    def schema_types(self) -> list[str]:
        return [t.value for t in SchemaType]

    # -- subjects and versions ---------------------------------------------------

    def subjects(self, *, prefix: str = "", deleted: bool = False) -> list[str]:
        with self._lock:
            return self.refresh().subjects(prefix=prefix, deleted=deleted)

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        with self._lock:
            return [v.version for v in self.refresh().versions(subject, deleted=deleted)]

    def subject_version(
        self, subject: str, version: VersionSpec, *, deleted: bool = False
    ) -> RegisteredVersion:
        with self._lock:
            state = self.refresh()
            return self._registered(state, state.version(subject, version, deleted=deleted))

    def versions_with_id(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) pairs using the id; 40403 when the id is unknown."""
        with self._lock:
            state = self.refresh()
            if state.schema(schema_id) is None:
                raise SchemaNotFoundError(f"Schema {schema_id} not found")
            found = state.versions_with_id(schema_id, deleted=deleted)
            return [(v.subject, v.version) for v in found]

    def subjects_with_id(self, schema_id: int, *, deleted: bool = False) -> list[str]:
        pairs = self.versions_with_id(schema_id, deleted=deleted)
        return sorted({subject for subject, _ in pairs})

    def referenced_by(self, subject: str, version: VersionSpec) -> list[int]:
        with self._lock:
            state = self.refresh()
            entry = state.version(subject, version, deleted=True)
            return state.referenced_by(subject, entry.version)

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """The versions deleted (soft first, then permanently)."""
        return self._write(lambda state: state.delete_subject_event(subject, permanent=permanent))

    def delete_version(self, subject: str, version: VersionSpec, *, permanent: bool = False) -> int:
        return self._write(
            lambda state: state.delete_version_event(subject, version, permanent=permanent)
        )

    # -- config and mode ---------------------------------------------------------

    def compatibility(
        self, subject: str | None = None, *, default_to_global: bool = True
    ) -> CompatibilityLevel:
        with self._lock:
            return self.refresh().compatibility(subject, default_to_global=default_to_global)

    def set_compatibility(
        self, subject: str | None, level: CompatibilityLevel
    ) -> CompatibilityLevel:
        return self._write(lambda state: (state.config_event(subject, level), level))

    def delete_compatibility(self, subject: str | None) -> CompatibilityLevel:
        """Remove the subject's (or the global) level; the one it had."""

        def decide(state: RegistryState) -> tuple[Event, CompatibilityLevel]:
            previous = state.compatibility(subject)
            return state.config_event(subject, None), previous

        return self._write(decide)

    def mode(self, subject: str | None = None, *, default_to_global: bool = True) -> Mode:
        with self._lock:
            return self.refresh().mode(subject, default_to_global=default_to_global)

    def set_mode(self, subject: str | None, mode: Mode, *, force: bool = False) -> Mode:
        return self._write(lambda state: (state.mode_event(subject, mode, force=force), mode))

    def delete_mode(self, subject: str | None) -> Mode:
        def decide(state: RegistryState) -> tuple[Event, Mode]:
            previous = state.mode(subject)
            return state.mode_event(subject, None), previous

        return self._write(decide)

    def subject_exists(self, subject: str) -> bool:
        with self._lock:
            try:
                self.refresh().versions(subject)
            except SubjectNotFoundError:
                return False
            return True


def _incompatible(subject: str, problems: list[str]) -> SchemaRegistryError:
    return IncompatibleSchemaError(
        f"Schema being registered is incompatible with an earlier schema for subject "
        f'"{subject}", details: [{"; ".join(problems)}]'
    )
