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
class Finding:
    """One problem: which check found it, where, and the root-relative paths a repair deletes.

    ``delete`` is empty unless deleting those paths is safe under the
    multi-writer protocol (see docs/operations-doctor.md); everything else is
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

    @property
    def repairable(self) -> bool:
        return bool(self.delete)

    def to_json(self) -> dict[str, object]:
        return {
            "check": self.check,
            "severity": self.severity.value,
            "topic": self.topic,
            "path": self.path,
            "message": self.message,
            "repairable": self.repairable,
        }

    def line(self) -> str:
        fix = " [repairable]" if self.repairable else ""
        where = f"{self.topic}: " if self.topic else ""
        return f"{self.severity.value.upper():7} {self.check:18} {where}{self.message}{fix}"
