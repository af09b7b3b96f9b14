"""Group ids and member ids: Kafka's rules for the one, Kafka's shape for the other."""

from __future__ import annotations

import uuid

from lakelog.errors import InvalidGroupIdError
from lakelog.names import check_name


def validate_group_id(group_id: object) -> str:
    """Kafka's group id rules, which also keep ids safe as storage path segments."""
    return check_name(group_id, "group id", InvalidGroupIdError)


def new_member_id(client_id: str) -> str:
    """``<client id>-<uuid>`` as Kafka names members, so logs show whose member it is."""
    prefix = client_id or "consumer"
    return f"{prefix}-{uuid.uuid4()}"
