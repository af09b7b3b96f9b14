"""Errors only a client can see: the network failed, or a consumer has nowhere to start.

Everything a broker reports arrives as the ``lakelog.errors`` class of its Kafka
error code (see ``connection.error_from_response``). These two classes cover
what no broker can report. They still use Kafka's codes and names, so callers
keep one rule: catch ``LakelogError`` and look at ``.retriable``.
"""

from __future__ import annotations

from lakelog.errors import LakelogError, OffsetOutOfRangeError


class NetworkError(LakelogError):
    """No answer from a broker: refused, reset, or the connection broke mid-response.

    Kafka's NETWORK_EXCEPTION (code 13). Retriable, but ambiguous for writes:
    the broker may have committed the request before the connection broke,
    which is why the producer resends with the same sequence numbers.
    """

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    http_status = 503


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """A consumer has no position for a partition and ``auto_offset_reset="none"``.

    Kafka raises NoOffsetForPartitionException here. It subclasses
    OffsetOutOfRangeError because both mean the same thing to the application:
    choose a position with ``seek`` before polling that partition again.
    """


__all__ = ["NetworkError", "NoOffsetForPartitionError"]
