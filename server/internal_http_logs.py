"""The broker's own HTTP calls are logged at DEBUG, not at httpx's INFO.

Inside a broker, httpx carries only internal traffic: REST Proxy consumer
instances calling this broker over loopback (a heartbeat every few seconds
per instance) and relays to other brokers. httpx logs each request at INFO,
which buried the broker's own log lines; the filter turns those lines into
DEBUG lines, shown only when the broker runs with ``--log-level debug``.
httpx's warnings and errors, and every other logger, are left as they are.
"""

from __future__ import annotations

import logging


class InternalCallsAtDebug(logging.Filter):
    """Re-levels a logger's INFO records to DEBUG (dropped unless DEBUG is enabled)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        record.levelno = logging.DEBUG
        record.levelname = logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def log_internal_calls_at_debug() -> None:
    """Install the filter on httpx's logger (once per process)."""
    logger = logging.getLogger("httpx")
    if not any(isinstance(f, InternalCallsAtDebug) for f in logger.filters):
        logger.addFilter(InternalCallsAtDebug())
