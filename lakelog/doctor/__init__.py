"""``lakelog doctor``: check a storage root's invariants, and repair only what is safe
(docs/operations-doctor.md says what is repaired and why)."""

from lakelog.doctor.findings import Finding, Severity
from lakelog.doctor.repair import repair
from lakelog.doctor.scan import ScanOptions, scan_root

__all__ = ["Finding", "ScanOptions", "Severity", "repair", "scan_root"]
