"""Delta transaction-log actions as typed values, and their JSON form.

lakelog writes Delta commit files itself (one small put-if-absent per commit)
instead of going through a general-purpose writer: the append path then costs
one object write, and the commit protocol (one app transaction per partition
carrying its high watermark; docs/architecture.md, "Offsets without a
coordinator") is explicit code rather than a side
effect. Only the subset of the Delta protocol that the tables use is modelled;
anything else found in a log is kept as raw JSON so it survives untouched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Protocol:
    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            body["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            body["writerFeatures"] = list(self.writer_features)
        return {"protocol": body}


@dataclass(frozen=True, slots=True)
class Metadata:
    table_id: str
    name: str | None
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    created_time: int | None = None
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "metaData": {
                "id": self.table_id,
                "name": self.name,
                "description": self.description,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": self.schema_string,
                "partitionColumns": list(self.partition_columns),
                "configuration": dict(self.configuration),
                "createdTime": self.created_time,
            }
        }


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "partitionValues": self.partition_values,
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        if self.stats is not None:
            body["stats"] = self.stats
        if self.tags:
            body["tags"] = self.tags
        return {"add": body}

    def remove(self, deletion_timestamp: int, data_change: bool = True) -> RemoveFile:
        """The remove action that retires this file (keeping size/partition for readers)."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=deletion_timestamp,
            data_change=data_change,
            partition_values=self.partition_values,
            size=self.size,
            tags=self.tags,
        )


@dataclass(frozen=True, slots=True)
class RemoveFile:
    path: str
    deletion_timestamp: int
    data_change: bool = True
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": self.path,
            "deletionTimestamp": self.deletion_timestamp,
            "dataChange": self.data_change,
            "extendedFileMetadata": self.partition_values is not None,
        }
        if self.partition_values is not None:
            body["partitionValues"] = self.partition_values
        if self.size is not None:
            body["size"] = self.size
        if self.tags:
            body["tags"] = self.tags
        return {"remove": body}


@dataclass(frozen=True, slots=True)
class Txn:
    """An application transaction: ``app_id`` reached ``version`` (Delta's idempotence marker)."""

    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            body["lastUpdated"] = self.last_updated
        return {"txn": body}


@dataclass(frozen=True, slots=True)
class CommitInfo:
    values: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"commitInfo": self.values}


@dataclass(frozen=True, slots=True)
class OtherAction:
    """An action lakelog does not interpret (e.g. domainMetadata); kept verbatim."""

    raw: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.raw


Action = Protocol | Metadata | AddFile | RemoveFile | Txn | CommitInfo | OtherAction


def action_from_json(obj: dict[str, Any]) -> Action:
    """Parse one line of a Delta commit file."""
    if "add" in obj:
        a = obj["add"]
        return AddFile(
            path=a["path"],
            partition_values=dict(a.get("partitionValues") or {}),
            size=int(a.get("size") or 0),
            modification_time=int(a.get("modificationTime") or 0),
            data_change=bool(a.get("dataChange", True)),
            stats=a.get("stats"),
            tags=dict(a.get("tags") or {}),
        )
    if "remove" in obj:
        r = obj["remove"]
        return RemoveFile(
            path=r["path"],
            deletion_timestamp=int(r.get("deletionTimestamp") or 0),
            data_change=bool(r.get("dataChange", True)),
            partition_values=r.get("partitionValues"),
            size=r.get("size"),
            tags=dict(r.get("tags") or {}),
        )
    if "txn" in obj:
        t = obj["txn"]
        return Txn(t["appId"], int(t["version"]), t.get("lastUpdated"))
    if "metaData" in obj:
        m = obj["metaData"]
        return Metadata(
            table_id=m["id"],
            name=m.get("name"),
            schema_string=m["schemaString"],
            partition_columns=tuple(m.get("partitionColumns") or ()),
            configuration={k: v for k, v in (m.get("configuration") or {}).items()},
            created_time=m.get("createdTime"),
            description=m.get("description"),
        )
    if "protocol" in obj:
        p = obj["protocol"]
        rf, wf = p.get("readerFeatures"), p.get("writerFeatures")
        return Protocol(
            int(p["minReaderVersion"]),
            int(p["minWriterVersion"]),
            tuple(rf) if rf is not None else None,
            tuple(wf) if wf is not None else None,
        )
    if "commitInfo" in obj:
        return CommitInfo(dict(obj["commitInfo"]))
    return OtherAction(obj)


def encode_commit(actions: list[Action]) -> bytes:
    """A commit file: one JSON action per line."""
    return "".join(json.dumps(a.to_json(), separators=(",", ":")) + "\n" for a in actions).encode()


def decode_commit(data: bytes) -> list[Action]:
    return [action_from_json(json.loads(line)) for line in data.splitlines() if line.strip()]
