"""The registry's state: a pure fold of its events, and the rules each change must pass.

Every change is an event; the state after events 1..N is the same on every broker
that folded them, so a writer validates its change against the state it folded
and the stored log decides which of two concurrent writers came first. The
``*_event`` methods check Confluent's rules and return the event to store (or
the answer when nothing has to change); ``apply`` folds a stored event in.
Nothing here does I/O or parses schemas: identity is judged on the format's
canonical text, which the caller passes in.

Rules, as Confluent's Schema Registry has them:

* ids are global: one schema (type, canonical text, references) has one id in
  every subject; ids are never reused, not even after a permanent delete;
* versions count up per subject from the highest still stored (soft-deleted
  ones included); re-registering a live version's schema answers that version;
  re-registering a soft-deleted one makes a new version with the same id;
* a delete is soft first, permanent second; a version referenced by a live
  version of any subject cannot be deleted;
* modes: READONLY (and READONLY_OVERRIDE) refuse registrations and deletes;
  IMPORT accepts registrations with given ids and versions and skips the
  compatibility check; READWRITE assigns ids itself.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakelog.errors import (
    InvalidModeError,
    InvalidSchemaError,
    InvalidSchemaVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from server.schema_registry.compatibility import DEFAULT_LEVEL, CompatibilityLevel, parse_level
from server.schema_registry.types import SchemaReference, SchemaType

Event = dict[str, Any]
VersionSpec = int | Literal["latest"]
MAX_VERSION = 2**31 - 1


class Mode(enum.StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"

    @property
    def read_only(self) -> bool:
        return self in (Mode.READONLY, Mode.READONLY_OVERRIDE)


DEFAULT_MODE = Mode.READWRITE


def parse_mode(value: object) -> Mode:
    text = value.strip().upper() if isinstance(value, str) else ""
    try:
        return Mode(text)
    except ValueError:
        choices = ", ".join(m.value for m in Mode)
        raise InvalidModeError(f"Invalid mode {value!r}. Valid values are {choices}") from None


def parse_version(value: object) -> VersionSpec:
    """``latest`` (or -1) or a version from 1 to 2^31-1; Confluent's 42202 otherwise."""
    text = str(value).strip()
    if text.lower() == "latest" or text == "-1":
        return "latest"
    if text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_VERSION:
        return int(text)
    raise InvalidSchemaVersionError(
        f"The specified version '{value}' is not a valid version id. "
        f'Allowed values are between [1, {MAX_VERSION}] and the string "latest"'
    )


Identity = tuple[SchemaType, str, tuple[SchemaReference, ...]]


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """A schema as registered: the text answered to clients and the identity it has."""

    schema_id: int
    schema_type: SchemaType
    text: str
    canonical: str
    references: tuple[SchemaReference, ...] = ()

    @property
    def identity(self) -> Identity:
        return (self.schema_type, self.canonical, self.references)


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False


def _references(items: Iterable[Mapping[str, Any]]) -> tuple[SchemaReference, ...]:
    return tuple(
        SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in items
    )


def references_json(references: Iterable[SchemaReference]) -> list[dict[str, Any]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in references]


@dataclass
class RegistryState:
    """The registry after some prefix of its events; ``seq`` is the last one folded."""

    seq: int = 0
    #: Every schema ever given an id, permanently deleted ones included (ids are never reused).
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    by_identity: dict[Identity, int] = field(default_factory=dict)
    #: subject -> version -> entry; a subject disappears once its last version is purged.
    subject_versions: dict[str, dict[int, SubjectVersion]] = field(default_factory=dict)
    #: How many stored versions (soft-deleted included) use each id.
    uses: dict[int, int] = field(default_factory=dict)
    #: Subject (None: global) -> level or mode set for it.
    configs: dict[str | None, CompatibilityLevel] = field(default_factory=dict)
    modes: dict[str | None, Mode] = field(default_factory=dict)

    # -- folding ---------------------------------------------------------------

    def apply(self, seq: int, event: Event) -> None:
        """Fold in stored event ``seq`` (the next one). Unknown event types are skipped,
        so a broker reads a log that a newer broker wrote to."""
        kind = event.get("type")
        if kind == "register":
            self._apply_register(event)
        elif kind == "delete_version":
            self._apply_delete(event["subject"], [int(event["version"])], event["permanent"])
        elif kind == "delete_subject":
            versions = list(self.subject_versions.get(event["subject"], {}))
            self._apply_delete(event["subject"], versions, event["permanent"])
        elif kind == "config":
            self._set(self.configs, event.get("subject"), event.get("compatibility"), parse_level)
        elif kind == "mode":
            self._set(self.modes, event.get("subject"), event.get("mode"), parse_mode)
        self.seq = seq

    @staticmethod
    def _set(table: dict[str | None, Any], subject: str | None, value: object, parse: Any) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = parse(value)

    def _apply_register(self, event: Event) -> None:
        schema_id = int(event["id"])
        schema = self.schemas.get(schema_id)
        if schema is None:
            schema = StoredSchema(
                schema_id,
                SchemaType(event.get("schemaType", SchemaType.AVRO)),
                event["schema"],
                event["canonical"],
                _references(event.get("references", ())),
            )
            self.schemas[schema_id] = schema
        self.by_identity.setdefault(schema.identity, schema_id)
        subject, version = event["subject"], int(event["version"])
        versions = self.subject_versions.setdefault(subject, {})
        replaced = versions.get(version)
        if replaced is not None:
            self.uses[replaced.schema_id] -= 1
        versions[version] = SubjectVersion(subject, version, schema_id)
        self.uses[schema_id] = self.uses.get(schema_id, 0) + 1

    def _apply_delete(self, subject: str, versions: list[int], permanent: bool) -> None:
        entries = self.subject_versions.get(subject, {})
        for version in versions:
            entry = entries.get(version)
            if entry is None:
                continue
            if permanent:
                del entries[version]
                self.uses[entry.schema_id] -= 1
            else:
                entries[version] = SubjectVersion(subject, version, entry.schema_id, True)
        if not entries:
            self.subject_versions.pop(subject, None)
            if permanent:
                self.configs.pop(subject, None)
                self.modes.pop(subject, None)

    # -- queries ---------------------------------------------------------------

    def schema(self, schema_id: int) -> StoredSchema | None:
        """The schema with that id while a stored version (soft-deleted included) uses it."""
        if self.uses.get(schema_id, 0) <= 0:
            return None
        return self.schemas.get(schema_id)

    def subjects(self, *, prefix: str = "", deleted: bool = False) -> list[str]:
        return sorted(
            subject
            for subject, versions in self.subject_versions.items()
            if subject.startswith(prefix)
            and (deleted or any(not v.deleted for v in versions.values()))
        )

    def _entries(self, subject: str, deleted: bool) -> list[SubjectVersion]:
        """The subject's versions, oldest first; 40401 when it has none to show."""
        found = [
            v
            for _, v in sorted(self.subject_versions.get(subject, {}).items())
            if deleted or not v.deleted
        ]
        if not found:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        return found

    def versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        return self._entries(subject, deleted)

    def live_versions(self, subject: str) -> list[SubjectVersion]:
        """Non-deleted versions oldest first; empty for an unknown subject."""
        return [
            v for _, v in sorted(self.subject_versions.get(subject, {}).items()) if not v.deleted
        ]

    def version(self, subject: str, spec: VersionSpec, *, deleted: bool = False) -> SubjectVersion:
        entries = self._entries(subject, deleted)
        if spec == "latest":
            return entries[-1]
        for entry in entries:
            if entry.version == spec:
                return entry
        raise VersionNotFoundError(f"Version {spec} not found.")

    def find(
        self, subject: str, identity: Identity, *, deleted: bool = False
    ) -> SubjectVersion | None:
        """The subject's newest version holding that schema, if any."""
        schema_id = self.by_identity.get(identity)
        if schema_id is None:
            return None
        for _, entry in sorted(self.subject_versions.get(subject, {}).items(), reverse=True):
            if entry.schema_id == schema_id and (deleted or not entry.deleted):
                return entry
        return None

    def versions_with_id(self, schema_id: int, *, deleted: bool = False) -> list[SubjectVersion]:
        return [
            entry
            for subject in sorted(self.subject_versions)
            for _, entry in sorted(self.subject_versions[subject].items())
            if entry.schema_id == schema_id and (deleted or not entry.deleted)
        ]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live versions whose schema references ``subject`` ``version``."""
        ids: set[int] = set()
        for versions in self.subject_versions.values():
            for entry in versions.values():
                if entry.deleted:
                    continue
                refs = self.schemas[entry.schema_id].references
                if any(r.subject == subject and r.version == version for r in refs):
                    ids.add(entry.schema_id)
        return sorted(ids)

    def resolve_reference(self, ref: SchemaReference) -> SchemaReference:
        """The reference with ``latest`` (-1) resolved; 42201 when it names nothing."""
        try:
            spec: VersionSpec = "latest" if ref.version == -1 else ref.version
            entry = self.version(ref.subject, spec)
        except (SubjectNotFoundError, VersionNotFoundError):
            raise InvalidSchemaError(
                f"Invalid schema: reference '{ref.name}' names subject '{ref.subject}' "
                f"version {ref.version}, which is not registered"
            ) from None
        return SchemaReference(ref.name, ref.subject, entry.version)

    def compatibility(
        self, subject: str | None, *, default_to_global: bool = True
    ) -> CompatibilityLevel:
        """The level in force for ``subject`` (None: the global one)."""
        level = self.configs.get(subject)
        if level is not None:
            return level
        if subject is not None and not default_to_global:
            raise SubjectCompatibilityNotConfiguredError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        return self.configs.get(None, DEFAULT_LEVEL)

    def mode(self, subject: str | None, *, default_to_global: bool = True) -> Mode:
        mode = self.modes.get(subject)
        if mode is not None:
            return mode
        if subject is not None and not default_to_global:
            raise SubjectModeNotConfiguredError(
                f"Subject '{subject}' does not have subject-level mode configured"
            )
        return self.modes.get(None, DEFAULT_MODE)

    # -- changes ---------------------------------------------------------------

    def _check_writable(self, subject: str) -> Mode:
        mode = self.mode(subject)
        if mode.read_only:
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
        return mode

    def register_event(
        self,
        subject: str,
        schema: StoredSchema,
        *,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> Event | SubjectVersion:
        """The event registering ``schema`` (its ``schema_id`` ignored) under ``subject``,
        or the live version already holding it. ``schema_id``/``version`` are IMPORT's."""
        live = self.find(subject, schema.identity)
        if (
            live is not None
            and schema_id in (None, live.schema_id)
            and version in (None, live.version)
        ):
            return live
        mode = self._check_writable(subject)
        if (schema_id is not None or version is not None) and mode is not Mode.IMPORT:
            raise OperationNotPermittedError(
                f"Subject {subject} is in {mode} mode: a schema id or version can only be "
                "given in IMPORT mode"
            )
        existing_id = self.by_identity.get(schema.identity)
        if schema_id is None:
            schema_id = existing_id if existing_id is not None else max(self.schemas, default=0) + 1
        else:
            holder = self.schemas.get(schema_id)
            if holder is not None and holder.identity != schema.identity:
                raise OperationNotPermittedError(
                    f"Overwrite new schema with id {schema_id} is not permitted: "
                    "that id belongs to another schema"
                )
        stored = self.subject_versions.get(subject, {})
        if version is None:
            version = max(stored, default=0) + 1
        elif not 1 <= version <= MAX_VERSION:
            raise InvalidSchemaVersionError(f"Version {version} is not a valid version id")
        elif version in stored:
            raise OperationNotPermittedError(
                f"Subject {subject} version {version} exists: an import cannot overwrite it"
            )
        known = self.schemas.get(schema_id, schema)
        return {
            "type": "register",
            "subject": subject,
            "version": version,
            "id": schema_id,
            "schemaType": known.schema_type.value,
            "schema": known.text,
            "canonical": known.canonical,
            "references": references_json(known.references),
        }

    def _check_unreferenced(self, subject: str, versions: Iterable[int]) -> None:
        for version in versions:
            if self.referenced_by(subject, version):
                raise ReferenceExistsError(
                    f"One or more references exist to the schema of subject '{subject}' "
                    f"version {version}"
                )

    def delete_version_event(
        self, subject: str, spec: VersionSpec, *, permanent: bool = False
    ) -> tuple[Event, int]:
        self._check_writable(subject)
        entries = self._entries(subject, deleted=True)
        if spec == "latest":
            pool = entries if permanent else [e for e in entries if not e.deleted]
            if not pool:
                raise SubjectSoftDeletedError(
                    f"Subject '{subject}' was soft deleted. "
                    "Set permanent=true to delete permanently"
                )
            entry = pool[-1]
        else:
            match = [e for e in entries if e.version == spec]
            if not match:
                raise VersionNotFoundError(f"Version {spec} not found.")
            entry = match[0]
        if permanent and not entry.deleted:
            raise VersionNotSoftDeletedError(
                f"Subject '{subject}' Version {entry.version} was not deleted first before "
                "being permanently deleted"
            )
        if not permanent and entry.deleted:
            raise VersionSoftDeletedError(
                f"Subject '{subject}' Version {entry.version} was soft deleted. "
                "Set permanent=true to delete permanently"
            )
        self._check_unreferenced(subject, [entry.version])
        event = {
            "type": "delete_version",
            "subject": subject,
            "version": entry.version,
            "permanent": permanent,
        }
        return event, entry.version

    def delete_subject_event(
        self, subject: str, *, permanent: bool = False
    ) -> tuple[Event, list[int]]:
        self._check_writable(subject)
        entries = self._entries(subject, deleted=True)
        live = [e.version for e in entries if not e.deleted]
        if permanent and live:
            raise SubjectNotSoftDeletedError(
                f"Subject '{subject}' was not deleted first before being permanently deleted"
            )
        if not permanent and not live:
            raise SubjectSoftDeletedError(
                f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
            )
        affected = [e.version for e in entries] if permanent else live
        self._check_unreferenced(subject, affected)
        event = {"type": "delete_subject", "subject": subject, "permanent": permanent}
        return event, affected

    def config_event(self, subject: str | None, level: CompatibilityLevel | None) -> Event:
        """Set (or with None, remove) a level; removing one never set is 40408."""
        if level is None and subject is not None:
            self.compatibility(subject, default_to_global=False)
        return {"type": "config", "subject": subject, "compatibility": level and level.value}

    def mode_event(self, subject: str | None, mode: Mode | None, *, force: bool = False) -> Event:
        """Set (or remove) a mode. IMPORT needs an empty subject (or registry) unless forced."""
        if mode is None and subject is not None:
            self.mode(subject, default_to_global=False)
        if mode is Mode.IMPORT and not force:
            occupied = (
                self.subjects(deleted=True)
                if subject is None
                else ([subject] if subject in self.subject_versions else [])
            )
            if occupied:
                raise OperationNotPermittedError(
                    "Cannot import since found existing subjects: " + ", ".join(occupied[:10])
                )
        return {"type": "mode", "subject": subject, "mode": mode and mode.value}


def fold(events: Iterable[tuple[int, Event]]) -> RegistryState:
    state = RegistryState()
    for seq, event in events:
        state.apply(seq, event)
    return state
