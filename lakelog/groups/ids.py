"""Group ids and member ids: Kafka's rules for the one, Kafka's shape for the other."""

from __future__ import annotations

import re
import uuid

from lakelog.errors import InvalidGroupIdError

MAX_GROUP_ID_LENGTH = 249
_GROUP_ID = re.compile(r"[a-zA-Z0-9._-]+")


def validate_group_id(group_id: object) -> str:
    """Kafka's group id rules, which also keep ids safe as storage path segments."""
    if not isinstance(group_id, str) or not group_id:
        raise InvalidGroupIdError("group id must be a non-empty string")
    if group_id in (".", ".."):
        raise InvalidGroupIdError(f"group id cannot be {group_id!r}")
    if len(group_id) > MAX_GROUP_ID_LENGTH:
        raise InvalidGroupIdError(
            f"group id is {len(group_id)} characters long; the limit is {MAX_GROUP_ID_LENGTH}"
        )
    if not _GROUP_ID.fullmatch(group_id):
        raise InvalidGroupIdError(
            f"group id {group_id!r} is illegal: only ASCII letters, digits, '.', '_' and '-' "
            "are allowed"
        )
    return group_id


def new_member_id(client_id: str) -> str:
    """``<client id>-<uuid>`` as Kafka names members, so logs show whose member it is."""
    prefix = client_id or "consumer"
    return f"{prefix}-{uuid.uuid4()}"
