"""Apply the repairs the checks marked safe: deleting orphans and stale entries, nothing else."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from lakelog.doctor.findings import Finding
from lakelog.storage import Storage

log = logging.getLogger(__name__)


def repair(storage: Storage, findings: Iterable[Finding]) -> list[Finding]:
    """Delete what each repairable finding names; returns the findings repaired."""
    repaired = []
    for finding in findings:
        if not finding.repairable:
            continue
        for path in finding.delete:
            log.info("doctor: deleting %s (%s)", path, finding.check)
            if finding.tree:
                storage.delete_tree(path)
            else:
                storage.delete(path)
        repaired.append(finding)
    return repaired
