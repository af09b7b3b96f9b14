"""``lakelog doctor``: check a storage root's invariants, and repair only what is safe.

``checks`` holds the pure rules (facts in, findings out), ``scan`` gathers
the facts from a root, ``repair`` deletes what the findings mark as safe to
delete. See docs/operations-doctor.md for what is repaired and why.
"""

from lakelog.doctor.findings import Finding, Severity
from lakelog.doctor.repair import repair
from lakelog.doctor.scan import ScanOptions, scan_root

__all__ = ["Finding", "ScanOptions", "Severity", "repair", "scan_root"]
