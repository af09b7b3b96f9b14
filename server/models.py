"""Request and response bodies of the native HTTP API (``/v1``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from lakelog.partition_state import PartitionOffsets, PartitionState
from lakelog.produce_batch import MAX_TIMESTAMP_MS
from server.codec import DataFormat
from server.request_bodies import RequestBody


class ErrorBody(BaseModel):
    """Every error: Kafka's error code and name, a message naming the problem, retriable."""

    error_code: int = Field(description="Kafka protocol error code, e.g. 3")
    error: str = Field(description="Kafka error name, e.g. UNKNOWN_TOPIC_OR_PARTITION")
    message: str
    retriable: bool
    details: dict[str, Any] | None = None


class HeaderIn(RequestBody):
    key: str
    value: Any = Field(None, description="Encoded like values (json headers as strings)")


class RecordIn(RequestBody):
    key: Any = None
    value: Any = None
    partition: int | None = Field(None, ge=0, le=2**31 - 1)
    # The same bound the log enforces (year 9999), so the documented range is the real one.
    timestamp_ms: int | None = Field(None, ge=0, le=MAX_TIMESTAMP_MS)
    headers: list[HeaderIn] = Field(default_factory=list)


class ProduceRequest(RequestBody):
    records: list[RecordIn] = Field(min_length=1)
    key_format: DataFormat = "string"
    value_format: DataFormat = "string"
    producer_id: int | None = Field(None, ge=0, le=2**63 - 1)
    sequence: int | None = Field(
        None, ge=0, le=2**31 - 1, description="Base sequence of the first record (idempotence)"
    )


class RecordOffset(BaseModel):
    partition: int
    offset: int
    timestamp_ms: int


class ProduceResponse(BaseModel):
    topic: str
    records: list[RecordOffset]
    duplicate: bool = Field(False, description="True if this retry was already written")
    throttle_time_ms: int = Field(0, description="How long a quota delayed this answer")


class AcceptedResponse(BaseModel):
    """acks=0: the records were queued; no durability is promised."""

    topic: str
    accepted: int
    throttle_time_ms: int = Field(0, description="How long a quota delayed this answer")


class HeaderOut(BaseModel):
    key: str
    value: Any = None


class RecordOut(BaseModel):
    offset: int
    timestamp_ms: int
    timestamp_type: str
    key: Any = None
    value: Any = None
    headers: list[HeaderOut] = Field(default_factory=list)


class FetchResponse(BaseModel):
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    next_offset: int
    records: list[RecordOut]
    throttle_time_ms: int = Field(0, description="How long a quota delayed this answer")


class OffsetResponse(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None = None


class TopicOffsets(BaseModel):
    topic: str
    partitions: list[PartitionOffsets]


class CreateTopicRequest(RequestBody):
    name: str
    partitions: int = Field(1, ge=1, le=10_000)
    replication_factor: int | None = Field(None, description="Accepted for compatibility")
    configs: dict[str, str] = Field(default_factory=dict)


class ConfigEntry(BaseModel):
    name: str
    value: str
    source: str
    is_default: bool


class TopicDescriptionOut(BaseModel):
    name: str
    topic_id: str
    table_uri: str
    version: int
    size_bytes: int
    partitions: list[PartitionState]
    configs: list[ConfigEntry]
    commit_leader: str | None = Field(
        None,
        description="Broker id of the topic's commit leader, the broker that commits every "
        "broker's appends to it, as this broker sees the live brokers; null when brokers "
        "commit their own appends (commit_handoff=false).",
    )
    kafka_leaders: list[int] | None = Field(
        None,
        description="Per partition, the Kafka node id of its leader, as Kafka's Metadata "
        "answers it (the one replica, always in sync); null when this broker has no Kafka "
        "listener.",
    )


class TopicList(BaseModel):
    topics: list[str]


class AlterConfigsRequest(RequestBody):
    set: dict[str, str] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)


class CreatePartitionsRequest(RequestBody):
    count: int = Field(ge=1, le=10_000, description="The new total number of partitions")


class BrokerOut(BaseModel):
    broker_id: str
    url: str
    started_ms: int
    heartbeat_ms: int


class BrokerList(BaseModel):
    cluster_id: str
    brokers: list[BrokerOut]


class Health(BaseModel):
    status: str
    broker_id: str
