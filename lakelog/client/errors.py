"""Errors only a client can see: the network failed, or a consumer has nowhere to start.

A broker's errors arrive as ``lakelog.errors`` classes; these cover what no broker can
report, with Kafka's codes too, so callers catch ``LakelogError`` and check ``.retriable``.
"""

from __future__ import annotations

from lakelog.errors import LakelogError, OffsetOutOfRangeError


class NetworkError(LakelogError):
    """No answer from a broker: Kafka's NETWORK_EXCEPTION. Retriable but ambiguous for
    writes (the broker may have committed), so the producer resends the same sequences."""

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    http_status = 503


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """No position and ``auto_offset_reset="none"`` (Kafka's NoOffsetForPartitionException);
    an OffsetOutOfRangeError because the remedy is the same: ``seek`` before polling."""


__all__ = ["NetworkError", "NoOffsetForPartitionError"]
