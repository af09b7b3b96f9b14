"""Subject name strategies: the subject a record's schema must be registered under.

Confluent's serializers name the subject after the topic (TopicNameStrategy), after
the schema's record (RecordNameStrategy) or after both (TopicRecordNameStrategy).
A Protobuf record is named after the message it holds, which its message indexes
name: one file registered once serves records of each of its messages.
"""

from __future__ import annotations

import json

from lakelog.topic_config import (
    RECORD_NAME_STRATEGY,
    TOPIC_NAME_STRATEGY,
    TOPIC_RECORD_NAME_STRATEGY,
)
from server.schema_registry.protobuf import ProtobufSchema, read_message_indexes
from server.schema_registry.types import ParsedSchema, SchemaType

#: The name Confluent gives a JSON Schema without a ``title``.
UNTITLED_JSON = "record"


def record_name(schema: ParsedSchema) -> str | None:
    """The name a record name strategy takes from a schema; None if it has none.

    Avro: the named type's full name, a primitive type's own name; JSON Schema: its
    ``title``, else ``record``; Protobuf: the file's first message with its package
    (the message of index ``[0]``).
    """
    if schema.schema_type is SchemaType.PROTOBUF:
        native = schema.native
        if not isinstance(native, ProtobufSchema):
            return None
        messages = list(native.descriptor.message_types_by_name.values())
        return str(messages[0].full_name) if messages else None
    try:
        document = json.loads(schema.text)
    except ValueError:
        return None
    if schema.schema_type is SchemaType.JSON:
        title = document.get("title") if isinstance(document, dict) else None
        return title if isinstance(title, str) and title else UNTITLED_JSON
    if isinstance(document, str):
        return document
    if not isinstance(document, dict):
        return None
    name = document.get("name")
    if isinstance(name, str):
        namespace = document.get("namespace")
        if "." in name or not isinstance(namespace, str) or not namespace:
            return name
        return f"{namespace}.{name}"
    kind = document.get("type")
    return kind if isinstance(kind, str) else None


def message_name(schema: ProtobufSchema, payload: memoryview) -> str | None:
    """The full name of the message a Protobuf payload's indexes name; None if they name
    none (the payload then fails to decode, which says why)."""
    try:
        indexes, _ = read_message_indexes(payload)
        return str(schema.message_descriptor(indexes).full_name)
    except ValueError:
        return None


def subject_for(strategy: str, topic: str, is_key: bool, name: str | None) -> str | None:
    """The subject a record's schema must be registered under (None: the schema has no
    record name and the strategy needs one)."""
    if strategy == TOPIC_NAME_STRATEGY:
        return f"{topic}-{'key' if is_key else 'value'}"
    if name is None:
        return None
    if strategy == RECORD_NAME_STRATEGY:
        return name
    if strategy == TOPIC_RECORD_NAME_STRATEGY:
        return f"{topic}-{name}"
    raise ValueError(f"unknown subject name strategy {strategy!r}")
