"""Request and response bodies of the group endpoints (docs/consumer-groups.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from server.request_bodies import RequestBody

INT32 = 2**31 - 1
INT64 = 2**63 - 1


class TopicPartitionModel(RequestBody):
    topic: str = Field(min_length=1, max_length=249)
    partition: int = Field(ge=0, le=INT32)


class JoinGroupRequest(RequestBody):
    member_id: str = Field("", max_length=1024, description="Empty on the first join")
    group_instance_id: str | None = Field(None, max_length=249)
    client_id: str = Field("", max_length=255)
    session_timeout_ms: int = Field(10_000, ge=1, le=INT32)
    rebalance_timeout_ms: int = Field(300_000, ge=1, le=INT32)
    protocols: list[str] = Field(
        min_length=1,
        description="Assignment strategies, preferred first: range, roundrobin, "
        "sticky, cooperative-sticky",
    )
    topics: list[str] = Field(default_factory=list, max_length=10_000)
    owned: list[TopicPartitionModel] | None = Field(
        None, description="Partitions the member owns now (sticky strategies)"
    )


class JoinGroupResponse(BaseModel):
    group_id: str
    generation_id: int
    member_id: str
    leader_id: str | None
    protocol: str | None
    members: list[str]
    assignment: list[TopicPartitionModel]


class GenerationRequest(RequestBody):
    generation_id: int = Field(ge=-1, le=INT32)


class SyncGroupResponse(BaseModel):
    generation_id: int
    assignment: list[TopicPartitionModel]


class HeartbeatResponse(BaseModel):
    throttle_time_ms: int = 0


class OffsetCommitEntry(TopicPartitionModel):
    offset: int = Field(ge=0, le=INT64)
    metadata: str = Field("", max_length=4096)


class OffsetCommitRequest(RequestBody):
    member_id: str = Field("", max_length=1024)
    generation_id: int = Field(-1, ge=-1, le=INT32)
    offsets: list[OffsetCommitEntry] = Field(max_length=100_000)


class PartitionRow(BaseModel):
    """The topic partition a row of a response is about."""

    topic: str
    partition: int


class OffsetCommitResult(PartitionRow):
    error_code: int = 0
    error: str | None = None


class OffsetCommitResponse(BaseModel):
    offsets: list[OffsetCommitResult]


class FetchedOffset(PartitionRow):
    offset: int
    metadata: str
    commit_timestamp: int


class OffsetFetchResponse(BaseModel):
    group_id: str
    offsets: list[FetchedOffset]


class GroupSummary(BaseModel):
    group_id: str
    state: str
    protocol_type: str = "consumer"
    members: int


class GroupList(BaseModel):
    groups: list[GroupSummary]


class CoordinatorOut(BaseModel):
    group_id: str
    broker_id: str
    url: str


class BrokerRef(BaseModel):
    broker_id: str
    url: str


class MemberOut(BaseModel):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartitionModel]


class DescribedOffset(PartitionRow):
    offset: int
    metadata: str
    log_end_offset: int | None
    lag: int | None
    member_id: str | None


class GroupDescription(BaseModel):
    group_id: str
    state: str
    protocol: str | None
    generation_id: int
    coordinator: BrokerRef
    members: list[MemberOut]
    offsets: list[DescribedOffset]


class ResetTopic(RequestBody):
    topic: str = Field(min_length=1, max_length=249)
    partitions: list[int] | None = Field(
        None, max_length=10_000, description="Omitted or empty: every partition"
    )


class ResetTarget(RequestBody):
    """Exactly one of the fields."""

    earliest: bool | None = None
    latest: bool | None = None
    current: bool | None = None
    offset: int | None = Field(None, ge=0, le=INT64)
    shift_by: int | None = Field(None, ge=-INT64, le=INT64)
    datetime: str | None = Field(None, max_length=64, description="ISO-8601, UTC if no zone")
    duration: str | None = Field(None, max_length=64, description="ISO-8601 PnDTnHnMnS")
    timestamp_ms: int | None = Field(None, ge=0, le=INT64)


class ResetOffsetsRequest(RequestBody):
    topics: list[ResetTopic] = Field(default_factory=list, max_length=10_000)
    all_topics: bool = False
    to: ResetTarget
    execute: bool = False


class ResetOffsetRow(PartitionRow):
    current_offset: int | None
    new_offset: int


class ResetOffsetsResponse(BaseModel):
    group_id: str
    executed: bool
    offsets: list[ResetOffsetRow]
