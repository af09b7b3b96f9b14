"""What the doctor reports: one finding per problem, with what (if anything) repairs it."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.StrEnum):
    #: Data may be unreadable or the log's invariants are broken: needs an operator.
    ERROR = "error"
    #: Harmless leftovers (orphans, stale entries): cost space or confuse discovery.
    WARNING = "warning"


@dataclass(frozen=True)
class RecordToDrop:
    """A record a repair removes by rewriting its segment without it (see ``repair``)."""

    table_path: str
    #: The segment's path relative to the table, as in the Delta log.
    segment: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Finding:
    """One problem: which check found it, where, and what a repair deletes or drops.

    ``delete`` (root-relative paths) is empty unless deleting those paths is
    safe under the multi-writer protocol, and ``drop`` is set only for records
    no reader can use (see docs/operations-doctor.md); everything else is
    only reported.
    """

    check: str
    severity: Severity
    topic: str | None
    path: str
    message: str
    delete: tuple[str, ...] = ()
    #: The paths to delete are directories (a staging write, a dead table).
    tree: bool = False
    drop: RecordToDrop | None = None

    @property
    def repairable(self) -> bool:
        return bool(self.delete) or self.drop is not None

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "check": self.check,
            "severity": self.severity.value,
            "topic": self.topic,
            "path": self.path,
            "message": self.message,
            "repairable": self.repairable,
        }
        if self.drop is not None:
            body["partition"] = self.drop.partition
            body["offset"] = self.drop.offset
        return body

    def line(self) -> str:
        fix = " [repairable]" if self.repairable else ""
        where = f"{self.topic}: " if self.topic else ""
        return f"{self.severity.value.upper():7} {self.check:18} {where}{self.message}{fix}"
