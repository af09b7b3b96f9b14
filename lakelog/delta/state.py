"""The state of a Delta table at one version, folded from its actions (pure logic)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lakelog.delta.actions import Action, AddFile, Metadata, Protocol, RemoveFile, Txn
from lakelog.errors import UnsupportedVersionError

#: Table features this implementation reads and writes correctly. Anything else
#: (deletion vectors, column mapping, ...) changes what a file or a commit means,
#: so a table that needs it is refused rather than misread. The rules of appendOnly,
#: invariants and checkConstraints are kept on every commit (``writer_rules``).
SUPPORTED_READER_FEATURES = frozenset({"timestampNtz"})
SUPPORTED_WRITER_FEATURES = frozenset(
    {"appendOnly", "invariants", "timestampNtz", "checkConstraints"}
)


def check_protocol(protocol: Protocol) -> None:
    if protocol.min_reader_version > 3 or protocol.min_writer_version > 7:
        raise UnsupportedVersionError(
            f"Delta protocol {protocol.min_reader_version}/{protocol.min_writer_version} "
            "is newer than lakelog supports (reader 3, writer 7)"
        )
    unknown = sorted(
        set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES
        | set(protocol.writer_features or ()) - SUPPORTED_WRITER_FEATURES
    )
    # Legacy (pre-feature) versions imply features too: reader 2 means column
    # mapping, writer 4/5/6 add change data feed and generated columns / column
    # mapping / identity columns, none implemented.
    if protocol.min_reader_version == 2:
        unknown.append("columnMapping (reader version 2)")
    if protocol.min_writer_version in (4, 5, 6):
        unknown.append(f"writer version {protocol.min_writer_version} features")
    if unknown:
        raise UnsupportedVersionError(
            f"the Delta table uses features lakelog does not support: {', '.join(unknown)}"
        )


@dataclass
class TableState:
    """Files, app transactions, metadata and protocol of a table at ``version``.

    ``tombstones`` holds the remove actions a checkpoint must carry: a
    tombstone-driven vacuum (delta-rs's default mode) only deletes the files a
    remove names, so a checkpoint that forgot them would strand those files.
    Expired ones are dropped when a checkpoint is taken (``drop_tombstones_before``).
    """

    version: int = -1
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    files: dict[str, AddFile] = field(default_factory=dict)
    txns: dict[str, int] = field(default_factory=dict)
    tombstones: dict[str, RemoveFile] = field(default_factory=dict)

    def apply(self, version: int, actions: Iterable[Action]) -> list[Action]:
        """Fold the actions of commit ``version`` into the state; returns them for listeners."""
        if version != self.version + 1 and self.version != -1:
            raise ValueError(f"commit {version} applied to state at version {self.version}")
        applied = list(actions)
        for action in applied:
            if isinstance(action, AddFile):
                self.files[action.path] = action
                if self.tombstones:
                    self.tombstones.pop(action.path, None)
            elif isinstance(action, RemoveFile):
                self.files.pop(action.path, None)
                self.tombstones[action.path] = action
            elif isinstance(action, Txn):
                self.txns[action.app_id] = action.version
            elif isinstance(action, Metadata):
                self.metadata = action
            elif isinstance(action, Protocol):
                check_protocol(action)
                self.protocol = action
        self.version = version
        return applied

    def drop_tombstones_before(self, deletion_ms: int) -> None:
        """Forget removes older than the table's deleted-file retention (Delta's expiry)."""
        expired = [p for p, r in self.tombstones.items() if r.deletion_timestamp < deletion_ms]
        for path in expired:
            del self.tombstones[path]

    def txn_version(self, app_id: str, default: int = 0) -> int:
        return self.txns.get(app_id, default)
