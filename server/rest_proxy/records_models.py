"""Bodies of the Kafka REST Proxy compatible APIs (v2 at ``/topics``, v3 at ``/v3``).

Field names and nesting follow Confluent's REST Proxy so its clients work
unchanged. Class names carry a ``V2``/``V3`` prefix so they never collide with
the native models in the OpenAPI components. Request models refuse unknown
fields (the REST Proxy answers "Unrecognized field" too); the schema-registry
fields exist only so that they can be refused with a clear message.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

INT32_MAX = 2**31 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- v2 ---------------------------------------------------------------------------


class V2Error(BaseModel):
    error_code: int = Field(description="HTTP status * 100 + a sub-code, e.g. 40401")
    message: str


class V2PartitionRecord(_Strict):
    """A record of ``POST /topics/{topic}/partitions/{partition}`` (the path's partition)."""

    key: Any = Field(None, description="base64 (binary) or any JSON value (json); null = no key")
    value: Any = Field(
        None, description="base64 (binary) or any JSON value (json); null = tombstone"
    )


class V2TopicRecord(V2PartitionRecord):
    partition: int | None = Field(
        None, ge=0, le=INT32_MAX, description="Chosen from the key (or sticky) when absent"
    )


class _V2SchemaFields(_Strict):
    key_schema: str | None = Field(None, description="Refused: there is no schema registry")
    key_schema_id: int | None = Field(None, description="Refused: there is no schema registry")
    value_schema: str | None = Field(None, description="Refused: there is no schema registry")
    value_schema_id: int | None = Field(None, description="Refused: there is no schema registry")


class V2TopicProduceRequest(_V2SchemaFields):
    records: list[V2TopicRecord] = Field(min_length=1)


class V2PartitionProduceRequest(_V2SchemaFields):
    records: list[V2PartitionRecord] = Field(min_length=1)


class V2PartitionOffset(BaseModel):
    partition: int | None
    offset: int | None
    error_code: int | None = Field(description="null on success; 1 non-retriable, 2 retriable")
    error: str | None


class V2ProduceResponse(BaseModel):
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    offsets: list[V2PartitionOffset]


class V2BrokerList(BaseModel):
    brokers: list[int] = Field(description="Kafka ids of the live brokers")


class V2Replica(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class V2Partition(BaseModel):
    partition: int
    leader: int
    replicas: list[V2Replica]


class V2Topic(BaseModel):
    name: str
    configs: dict[str, str] = Field(description="Every effective topic config, as strings")
    partitions: list[V2Partition]


class V2PartitionOffsets(BaseModel):
    beginning_offset: int = Field(description="The log start offset")
    end_offset: int = Field(description="The high watermark (offset of the next record)")


# -- v3 ---------------------------------------------------------------------------


class V3Error(BaseModel):
    error_code: int = Field(description="Usually the HTTP status, e.g. 404")
    message: str | None


class V3ProduceData(_Strict):
    """A key or value: its ``type`` says how ``data`` is encoded."""

    type: str | None = Field(None, description="BINARY (base64, the default), JSON or STRING")
    data: Any = None
    subject: str | None = Field(None, description="Refused: there is no schema registry")
    subject_name_strategy: str | None = Field(None, description="Refused: no schema registry")
    schema_id: int | None = Field(None, description="Refused: there is no schema registry")
    schema_version: int | None = Field(None, description="Refused: there is no schema registry")
    schema_: str | None = Field(
        None, alias="schema", description="Refused: there is no schema registry"
    )


class V3ProduceHeader(_Strict):
    name: str
    value: str | None = Field(None, description="base64")


class V3ProduceRecord(_Strict):
    """One record of ``POST .../records`` (send several as concatenated JSON objects)."""

    partition_id: int | None = Field(None, ge=0, le=INT32_MAX)
    headers: list[V3ProduceHeader] = Field(default_factory=list)
    key: V3ProduceData | None = None
    value: V3ProduceData | None = None
    timestamp: str | None = Field(None, description="RFC 3339; the broker's clock when absent")


class V3BatchEntry(V3ProduceRecord):
    id: str = Field(min_length=1, max_length=80)


class V3ProduceResponseData(BaseModel):
    type: str
    size: int


class V3ProduceResponse(BaseModel):
    """A delivery report; ``error_code`` 200 means the record is durable."""

    error_code: int
    message: str | None = None
    cluster_id: str | None = None
    topic_name: str | None = None
    partition_id: int | None = None
    offset: int | None = None
    timestamp: str | None = None
    key: V3ProduceResponseData | None = None
    value: V3ProduceResponseData | None = None


class V3BatchSuccess(BaseModel):
    id: str
    cluster_id: str
    topic_name: str
    partition_id: int
    offset: int
    timestamp: str | None = None
    key: V3ProduceResponseData | None = None
    value: V3ProduceResponseData | None = None


class V3BatchFailure(BaseModel):
    id: str
    error_code: int
    message: str | None = None


class V3BatchResponse(BaseModel):
    successes: list[V3BatchSuccess]
    failures: list[V3BatchFailure]


# -- helpers ----------------------------------------------------------------------


def describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's complaint in one line, naming each field at fault."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()))
        if err.get("type") == "extra_forbidden":
            problems.append(f"Unrecognized field: {where}")
        else:
            problems.append(f"{where or 'body'}: {err.get('msg')}")
    return "; ".join(problems)[:2000]


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its ``$defs`` substituted in, for ``openapi_extra``."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return resolve(copy.deepcopy(defs[ref.rsplit("/", 1)[-1]]))
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved
