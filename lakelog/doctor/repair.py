"""Apply the repairs the checks marked safe: deleting orphans and stale entries, and
rewriting undecodable records out of the committed-offsets table; nothing else."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from lakelog.doctor.findings import Finding
from lakelog.errors import LakelogError
from lakelog.segment_rewrite import drop_records
from lakelog.storage import Storage
from lakelog.topic_log import TopicLog

log = logging.getLogger(__name__)


def repair(storage: Storage, findings: Iterable[Finding]) -> list[Finding]:
    """Delete what each repairable finding names and drop the records it names.

    Returns the findings repaired. The records to drop of one table are
    removed in one Delta commit; if that commit cannot be made (another job
    rewrote one of the segments meanwhile), the failure is logged, those
    findings stay unrepaired, and running the doctor again retries them.
    """
    repaired = []
    drops: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in findings:
        if not finding.repairable:
            continue
        if finding.drop is not None:
            drops[(finding.topic or "", finding.drop.table_path)].append(finding)
            continue
        for path in finding.delete:
            log.info("doctor: deleting %s (%s)", path, finding.check)
            if finding.tree:
                storage.delete_tree(path)
            else:
                storage.delete(path)
        repaired.append(finding)
    for (topic, table_path), dropped in drops.items():
        if _drop(storage, topic, table_path, dropped):
            repaired.extend(dropped)
    return repaired


def _drop(storage: Storage, topic: str, table_path: str, findings: list[Finding]) -> bool:
    doomed: dict[str, set[int]] = defaultdict(set)
    for finding in findings:
        assert finding.drop is not None
        doomed[finding.drop.segment].add(finding.drop.offset)
    topic_log = TopicLog(storage, topic, table_path)
    try:
        version = drop_records(topic_log, doomed)
    except LakelogError as exc:
        log.error("doctor: could not drop %d record(s) of %s: %s", len(findings), topic, exc)
        return False
    finally:
        topic_log.close()
    log.info(
        "doctor: dropped %d record(s) of %s from %d segment(s) in version %d",
        len(findings),
        topic,
        len(doomed),
        version,
    )
    return True
