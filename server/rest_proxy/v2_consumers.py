"""Kafka REST Proxy API v2 consumers: ``/consumers/{group}/instances/{instance}/...``.

Answers and errors use the v2 content types and error shape of ``v2_records``.
Decisions where the REST Proxy leaves room:

* ``auto.commit.enable`` defaults to false, as the REST Proxy sets it: a
  client commits with ``POST offsets``. With it on, the consumer auto-commits
  while polled and commits on delete and on expiry.
* ``POST offsets`` takes the offsets of the *last records consumed* and
  commits offset + 1, as the REST Proxy does, and answers one ``{topic,
  partition, consumed, committed}`` per partition named (``[]`` when an empty
  body committed everything consumed); ``GET offsets`` answers the committed
  offset as stored (the next record to read), leaving out partitions without one.
* ``consumer.instance.timeout.ms`` may be given per instance in the create
  body (a lakelog extension).
* Instances of format avro, jsonschema or protobuf decode each key and value
  with the schema its Confluent framing names (a schema of the broker's Schema
  Registry): Avro as Avro's JSON encoding (bytes as one code point per byte),
  JSON Schema as the JSON document, Protobuf as its JSON mapping. A null key or
  value stays null. A record that does not decode is 408/40801, as the REST
  Proxy answers a deserialization failure, and is delivered again next time.
* Errors keep the REST Proxy's codes (the constants below).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import ssl
import time
from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakelog.client import Consumer, OffsetAndMetadata, TopicPartition
from lakelog.client.connection import Connection
from lakelog.errors import InvalidGroupIdError, LakelogError
from lakelog.groups.ids import validate_group_id
from lakelog.numerals import is_signed_int
from lakelog.records import ConsumerRecord
from server.broker import Broker
from server.content_negotiation import acceptable
from server.http import read_body
from server.peer_tls import peer_tls_context
from server.rest_proxy.consumer_instances import (
    Caller,
    ConsumerInstance,
    ConsumerInstances,
    InstanceConfig,
    InstanceExists,
    InstanceNotFound,
)
from server.rest_proxy.records_models import V2Failure, validation_message
from server.rest_proxy.schemas import V2_FORMATS, Schemas, json_safe, schemas_of
from server.rest_proxy.v2_records import (
    BINARY_V2,
    JSON_V2,
    V2_JSON,
    BrokerDep,
    V2JSONResponse,
    from_lakelog,
    v2_router,
)
from server.security import identity_of
from server.settings import BrokerSettings

INSTANCE_NOT_FOUND = 40403
INSTANCE_EXISTS = 40902
ILLEGAL_STATE = 40903
INVALID_GROUP = 42204
#: The REST Proxy's code for consumer configs the consumer refuses (the same number).
INVALID_CONSUMER_CONFIG = 42204
NOT_ACCEPTABLE = 40601
#: the REST Proxy's embedded formats and the content type of their records
FORMAT_TYPES = {
    "binary": BINARY_V2,
    "json": JSON_V2,
    **{name: f"application/vnd.kafka.{name}.v2+json" for name in V2_FORMATS},
}
#: the REST Proxy's code for a record its deserializer cannot read (HTTP 408)
UNDECODABLE = 40801
_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

log = logging.getLogger(__name__)

router = v2_router(
    "REST Proxy v2 consumers",
    (404, "Consumer instance not found (40403)"),
    (409, "Instance exists (40902) or illegal state (40903)"),
    (406, "Accept names no type this API answers with (406), or another format (40601)"),
    (422, "Invalid body, parameter or format (422), invalid group id or consumer config (42204)"),
    (500, "Kafka error (50002, or 50003 when retrying may succeed)"),
)


# -- bodies -------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CreateConsumer(_Body):
    name: str | None = None
    format: str = "binary"
    auto_offset_reset: str | None = Field(None, alias="auto.offset.reset")
    auto_commit_enable: str | bool | None = Field(None, alias="auto.commit.enable")
    fetch_min_bytes: str | int | None = Field(None, alias="fetch.min.bytes")
    consumer_request_timeout_ms: str | int | None = Field(None, alias="consumer.request.timeout.ms")
    consumer_instance_timeout_ms: str | int | None = Field(
        None, alias="consumer.instance.timeout.ms"
    )


class V2TopicPartition(_Body):
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)


class Partitions(_Body):
    partitions: list[V2TopicPartition]


class Subscription(_Body):
    topics: list[str] | None = None
    topic_pattern: str | None = None


class PartitionOffset(V2TopicPartition):
    offset: int = Field(ge=0)


class Positions(_Body):
    offsets: list[PartitionOffset] = Field(min_length=1)


class CommitOffset(PartitionOffset):
    metadata: str | None = None


class CommitOffsets(_Body):
    offsets: list[CommitOffset]


# -- plumbing -----------------------------------------------------------------------


def instance_manager(settings: BrokerSettings) -> ConsumerInstances:
    """The broker's instance manager; the app's lifespan makes it and closes it at shutdown.

    Each instance's consumer calls this broker with its creator's credentials,
    trusting and presenting what peers do.
    """
    url = settings.url
    tls = peer_tls_context(settings)

    def factory(group: str, config: InstanceConfig, caller: Caller) -> Consumer:
        connection = Connection(
            url,
            api_key=caller.api_key,
            token=caller.token,
            ssl_context=tls if isinstance(tls, ssl.SSLContext) else None,
        )
        return Consumer(
            url,
            connection=connection,
            group_id=group,
            client_id=f"rest-proxy-{settings.broker_id}",
            auto_offset_reset=config.auto_offset_reset,
            enable_auto_commit=config.auto_commit_enable,
            max_poll_interval_ms=config.instance_timeout_ms,
        )

    return ConsumerInstances(factory)


async def _instances(request: Request) -> ConsumerInstances:
    """The broker's instance manager (see ``instance_manager``)."""
    manager: ConsumerInstances = request.app.state.rest_consumers
    return manager


Instances = Annotated[ConsumerInstances, Depends(_instances)]


def _group(group: str) -> str:
    try:
        return validate_group_id(group)
    except InvalidGroupIdError as exc:
        raise V2Failure(422, INVALID_GROUP, exc.message) from None


def _caller(request: Request) -> Caller:
    """The authenticated caller and the credentials it presented (none when auth is off)."""
    token = None
    authorization = request.headers.get("authorization", "")
    if authorization[:7].lower() == "bearer ":
        token = authorization[7:].strip()
    return Caller(identity_of(request).principal, request.headers.get("x-api-key"), token)


async def _owned_instance(
    group: str, instance: str, request: Request, instances: Instances
) -> ConsumerInstance:
    """The path's instance (404/40403 if none), if the caller is the principal that created it
    (403/40301 otherwise)."""
    try:
        found = instances.get(_group(group), instance)
    except InstanceNotFound as exc:
        raise V2Failure(404, INSTANCE_NOT_FOUND, str(exc)) from None
    principal = identity_of(request).principal
    if found.owner.principal != principal:
        log.warning(
            "authorization denied: principal=%s used consumer instance %s/%s of %s",
            principal,
            group,
            instance,
            found.owner.principal,
        )
        raise V2Failure(
            403,
            40301,
            f"consumer instance {instance!r} of group {group!r} belongs to another principal",
        )
    return found


OwnedInstance = Annotated[ConsumerInstance, Depends(_owned_instance)]


async def _run(instances: ConsumerInstances, instance: ConsumerInstance, fn: Any) -> Any:
    """Run on the instance; the consumer's state errors become v2 answers."""
    try:
        return await instances.run(instance, fn)
    except InstanceNotFound as exc:
        raise V2Failure(404, INSTANCE_NOT_FOUND, str(exc)) from None
    # Kafka's IllegalStateException: an assign/subscribe conflict (RuntimeError), seeking a
    # partition not assigned to this instance (ValueError)
    except (RuntimeError, ValueError) as exc:
        raise V2Failure(409, ILLEGAL_STATE, f"Illegal state: {exc}") from None
    except InvalidGroupIdError as exc:
        raise V2Failure(422, INVALID_GROUP, exc.message) from None
    except LakelogError as exc:
        raise from_lakelog(exc) from None


async def _parse(
    request: Request, broker: Broker, model: type[Any], *, empty_ok: bool = False
) -> Any:
    raw = await read_body(request, broker.settings.max_request_bytes)
    if not raw.strip():
        if empty_ok:
            return None
        raise V2Failure(422, 422, f"a JSON body ({model.__name__}) is required")
    try:
        decoded = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise V2Failure(400, 400, f"Malformed JSON: {exc}") from None
    try:
        return model.model_validate(decoded)
    except ValidationError as exc:
        raise V2Failure(422, 422, validation_message(exc.errors())) from None


def _body_of(model: type[BaseModel], *, empty_ok: bool = False) -> Any:
    """A dependency: the request's body checked as ``model`` (see ``_parse``).

    Routes declare it after the instance, so an unknown or foreign instance is
    refused before its body is read."""

    async def parsed(request: Request, broker: BrokerDep) -> Any:
        return await _parse(request, broker, model, empty_ok=empty_ok)

    return Depends(parsed)


SubscriptionBody = Annotated[Subscription, _body_of(Subscription)]
PartitionsBody = Annotated[Partitions, _body_of(Partitions)]
PositionsBody = Annotated[Positions, _body_of(Positions)]
#: None for an empty body: commit everything consumed.
CommitBody = Annotated[CommitOffsets | None, _body_of(CommitOffsets, empty_ok=True)]


def invalid_config(message: str) -> V2Failure:
    """A consumer config the consumer cannot take: 422 with the REST Proxy's 42204."""
    return V2Failure(422, INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {message}")


def _int_option(name: str, value: str | int | None, default: int | None, low: int) -> int | None:
    if value is None:
        return default
    text = str(value).strip()
    if not is_signed_int(text) or int(text) < low:
        raise invalid_config(f"{name} must be an integer >= {low}, got {value!r}")
    return int(text)


def instance_config(body: CreateConsumer) -> InstanceConfig:
    """The create body checked: a bad format is 422/422, a bad consumer config 422/42204."""
    fmt = body.format.lower()
    if fmt not in FORMAT_TYPES:
        raise V2Failure(
            422,
            422,
            f"format {body.format!r} is not supported: use binary, json, avro, jsonschema "
            "or protobuf",
        )
    reset = (body.auto_offset_reset or "latest").lower()
    reset = {"smallest": "earliest", "largest": "latest"}.get(reset, reset)
    if reset not in ("earliest", "latest", "none"):
        raise invalid_config(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
    commit = body.auto_commit_enable
    if isinstance(commit, str):
        if commit.lower() not in ("true", "false"):
            raise invalid_config(f"auto.commit.enable must be true or false, got {commit!r}")
        commit = commit.lower() == "true"
    min_bytes = _int_option("fetch.min.bytes", body.fetch_min_bytes, None, -1)
    request_timeout = _int_option(
        "consumer.request.timeout.ms", body.consumer_request_timeout_ms, 1_000, 0
    )
    instance_timeout = _int_option(
        "consumer.instance.timeout.ms", body.consumer_instance_timeout_ms, 300_000, 1_000
    )
    assert request_timeout is not None and instance_timeout is not None
    return InstanceConfig(
        format=fmt,  # type: ignore[arg-type]
        auto_offset_reset=reset,  # type: ignore[arg-type]
        auto_commit_enable=bool(commit),
        fetch_min_bytes=None if min_bytes is None or min_bytes < 0 else min_bytes,
        request_timeout_ms=request_timeout,
        instance_timeout_ms=instance_timeout,
    )


def _tps(items: list[V2TopicPartition]) -> list[TopicPartition]:
    return [TopicPartition(i.topic, i.partition) for i in items]


def _no_content() -> Response:
    return Response(status_code=204, media_type=V2_JSON)


# -- instances ----------------------------------------------------------------------


@router.post("/consumers/{group}", summary="Create a consumer instance in a group")
async def create_instance(
    group: str,
    request: Request,
    broker: BrokerDep,
    instances: Instances,
) -> Response:
    """`format` is the instance's embedded format: `binary` (the default), `json`, `avro`,
    `jsonschema` or `protobuf`."""
    group = _group(group)
    body: CreateConsumer = await _parse(request, broker, CreateConsumer)
    if body.name is not None and not _NAME.fullmatch(body.name):
        raise V2Failure(422, 422, f"name {body.name!r} must be 1-249 characters of [a-zA-Z0-9._-]")
    config = instance_config(body)
    try:
        instance = await instances.create(group, body.name, config, _caller(request))
    except InstanceExists as exc:
        raise V2Failure(409, INSTANCE_EXISTS, str(exc)) from None
    except LakelogError as exc:
        raise from_lakelog(exc) from None
    base = f"{str(request.base_url).rstrip('/')}/consumers/{group}/instances/{instance.name}"
    return V2JSONResponse({"instance_id": instance.name, "base_uri": base})


@router.delete(
    "/consumers/{group}/instances/{instance}",
    status_code=204,
    summary="Close an instance (commits if auto-commit is on, leaves the group)",
)
async def delete_instance(target: OwnedInstance, instances: Instances) -> Response:
    try:
        await instances.delete(target.group, target.name)
    except InstanceNotFound as exc:
        raise V2Failure(404, INSTANCE_NOT_FOUND, str(exc)) from None
    return _no_content()


# -- subscription and assignment ------------------------------------------------------


@router.post(
    "/consumers/{group}/instances/{instance}/subscription",
    status_code=204,
    summary="Subscribe to topics or a topic pattern",
)
async def subscribe(
    target: OwnedInstance, body: SubscriptionBody, instances: Instances
) -> Response:
    if (body.topics is None) == (body.topic_pattern is None):
        raise V2Failure(422, 422, "give either topics or topic_pattern")
    if body.topics is not None:
        if not body.topics or any(not t for t in body.topics):
            raise V2Failure(422, 422, "topics must be a non-empty list of topic names")
        topics = list(body.topics)
        await _run(instances, target, lambda c: c.subscribe(topics))
    else:
        assert body.topic_pattern is not None
        try:
            pattern = re.compile(body.topic_pattern)
        except re.error as exc:
            raise V2Failure(422, 422, f"topic_pattern is not a valid regex: {exc}") from None
        await _run(instances, target, lambda c: c.subscribe(pattern=pattern))
    return _no_content()


@router.get("/consumers/{group}/instances/{instance}/subscription", summary="Subscribed topics")
async def get_subscription(target: OwnedInstance, instances: Instances) -> Response:
    topics = await _run(instances, target, lambda c: sorted(c.subscription()))
    return V2JSONResponse({"topics": topics})


@router.delete(
    "/consumers/{group}/instances/{instance}/subscription",
    status_code=204,
    summary="Unsubscribe (leave the group)",
)
async def unsubscribe(target: OwnedInstance, instances: Instances) -> Response:
    await _run(instances, target, lambda c: c.unsubscribe())
    return _no_content()


@router.post(
    "/consumers/{group}/instances/{instance}/assignments",
    status_code=204,
    summary="Assign partitions manually",
)
async def assign(target: OwnedInstance, body: PartitionsBody, instances: Instances) -> Response:
    partitions = _tps(body.partitions)
    await _run(instances, target, lambda c: c.assign(partitions))
    return _no_content()


@router.get("/consumers/{group}/instances/{instance}/assignments", summary="Assigned partitions")
async def get_assignments(target: OwnedInstance, instances: Instances) -> Response:
    assigned = await _run(instances, target, lambda c: sorted(c.assignment()))
    partitions = [{"topic": tp.topic, "partition": tp.partition} for tp in assigned]
    return V2JSONResponse({"partitions": partitions})


# -- positions ------------------------------------------------------------------------


@router.post(
    "/consumers/{group}/instances/{instance}/positions",
    status_code=204,
    summary="Seek partitions to offsets",
)
async def seek(target: OwnedInstance, body: PositionsBody, instances: Instances) -> Response:
    def apply(consumer: Consumer) -> None:
        for item in body.offsets:
            consumer.seek(TopicPartition(item.topic, item.partition), item.offset)

    await _run(instances, target, apply)
    return _no_content()


def _seek_route(where: Literal["beginning", "end"], summary: str) -> None:
    async def seek_to(
        target: OwnedInstance, body: PartitionsBody, instances: Instances
    ) -> Response:
        partitions = _tps(body.partitions)
        if not partitions:
            raise V2Failure(422, 422, "partitions must name at least one partition")

        def apply(consumer: Consumer) -> None:
            assigned = consumer.assignment()
            missing = [str(tp) for tp in partitions if tp not in assigned]
            if missing:
                raise ValueError(
                    f"partitions {', '.join(missing)} are not assigned to this instance"
                )
            if where == "beginning":
                consumer.seek_to_beginning(*partitions)
            else:
                consumer.seek_to_end(*partitions)

        await _run(instances, target, apply)
        return _no_content()

    seek_to.__name__ = f"seek_to_{where}"  # its route's name and OpenAPI operation id
    path = f"/consumers/{{group}}/instances/{{instance}}/positions/{where}"
    router.post(path, status_code=204, summary=summary)(seek_to)


_seek_route("beginning", "Seek partitions to their first offset")
_seek_route("end", "Seek partitions to their end")


# -- records --------------------------------------------------------------------------


def _size(record: ConsumerRecord) -> int:
    return len(record.key or b"") + len(record.value or b"")


def read_records(
    consumer: Consumer, timeout_ms: int, max_bytes: int | None, min_bytes: int | None
) -> list[ConsumerRecord]:
    """Poll until records (``min_bytes`` of them if set) or the timeout; keep to ``max_bytes``.

    Records polled but not returned (over ``max_bytes``) are sought back to,
    so the next request starts with them: nothing polled is skipped.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    out: list[ConsumerRecord] = []
    size = 0
    while True:
        remaining = max(int((deadline - time.monotonic()) * 1000), 0)
        for records in consumer.poll(remaining).values():
            out.extend(records)
            size += sum(_size(r) for r in records)
        enough = size >= min_bytes if min_bytes else bool(out)
        if enough or remaining <= 0:
            break
    if max_bytes is None:
        return out
    kept: list[ConsumerRecord] = []
    used = 0
    rewind: dict[TopicPartition, int] = {}
    for record in out:
        tp = TopicPartition(record.topic, record.partition)
        if tp in rewind or (kept and used + _size(record) > max_bytes):
            rewind.setdefault(tp, record.offset)
            continue
        kept.append(record)
        used += _size(record)
    for tp, offset in rewind.items():
        consumer.seek(tp, offset)
    return kept


def _embedded(data: bytes | None, fmt: str, where: str, schemas: Schemas | None = None) -> Any:
    if data is None:
        return None
    if fmt == "binary":
        return base64.b64encode(data).decode("ascii")
    if fmt in V2_FORMATS:
        assert schemas is not None
        return json_safe(schemas.decode(data, V2_FORMATS[fmt], where))
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where} is not JSON ({exc}); read it with a binary instance") from None


@router.get("/consumers/{group}/instances/{instance}/records", summary="Fetch records")
async def get_records(
    target: OwnedInstance,
    request: Request,
    broker: BrokerDep,
    instances: Instances,
    timeout: Annotated[int | None, Query(ge=0, le=300_000)] = None,
    max_bytes: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    """Answered in the instance's embedded format (`Accept` must name it: 406/40601).
    Instances of format `avro`, `jsonschema` and `protobuf` decode each key and value with
    the Schema Registry schema its framing names (Avro in Avro's JSON encoding, Protobuf in
    its JSON mapping); a record that does not decode is 408/40801 and is read again next
    time."""
    fmt = target.config.format
    content_type = FORMAT_TYPES[fmt]
    if not acceptable(request.headers.get("accept"), [content_type]):
        raise V2Failure(
            406,
            NOT_ACCEPTABLE,
            f"Consumer format does not match the embedded format requested by the Accept "
            f"header: the instance reads {fmt}, send Accept: {content_type}",
        )
    wait_ms = target.config.request_timeout_ms if timeout is None else timeout
    schemas = schemas_of(broker.schema_registry) if fmt in V2_FORMATS else None

    def fetch(consumer: Consumer) -> list[dict[str, Any]]:
        records = read_records(consumer, wait_ms, max_bytes, target.config.fetch_min_bytes)
        out = []
        for i, r in enumerate(records):
            where = f"record {r.topic}-{r.partition}@{r.offset}"
            try:
                key = _embedded(r.key, fmt, f"the key of {where}", schemas)
                value = _embedded(r.value, fmt, f"the value of {where}", schemas)
            except ValueError as exc:
                for later in records[i:]:  # re-deliver from the bad record on
                    tp = TopicPartition(later.topic, later.partition)
                    if consumer.position(tp) > later.offset:
                        consumer.seek(tp, later.offset)
                raise _Undecodable(str(exc)) from None
            out.append(
                {
                    "topic": r.topic,
                    "key": key,
                    "value": value,
                    "partition": r.partition,
                    "offset": r.offset,
                }
            )
        return out

    try:
        body = await _run(instances, target, fetch)
    except _Undecodable as exc:
        if fmt in V2_FORMATS:
            raise V2Failure(408, UNDECODABLE, f"Error deserializing: {exc}") from None
        raise V2Failure(500, 50002, f"Kafka error: {exc}") from None
    return Response(json.dumps(body, default=str), media_type=content_type)


class _Undecodable(Exception):
    """A record an instance of format json (or a schema'd format) cannot decode."""


# -- offsets --------------------------------------------------------------------------


class CommittedOffsetOut(BaseModel):
    topic: str
    partition: int
    consumed: int = Field(description="The offset sent: the last record consumed")
    committed: int = Field(description="The offset stored: the next record to read")


@router.post(
    "/consumers/{group}/instances/{instance}/offsets",
    responses={200: {"model": list[CommittedOffsetOut]}},
    summary="Commit offsets (an empty body: everything consumed)",
)
async def commit_offsets(target: OwnedInstance, body: CommitBody, instances: Instances) -> Response:
    if body is None or not body.offsets:
        await _run(instances, target, lambda c: c.commit())
        return V2JSONResponse([])
    offsets = {
        TopicPartition(o.topic, o.partition): OffsetAndMetadata(o.offset + 1, o.metadata or "")
        for o in body.offsets
    }
    await _run(instances, target, lambda c: c.commit(offsets))
    committed = [
        CommittedOffsetOut(
            topic=tp.topic, partition=tp.partition, consumed=om.offset - 1, committed=om.offset
        ).model_dump()
        for tp, om in offsets.items()
    ]
    return V2JSONResponse(committed)


@router.get("/consumers/{group}/instances/{instance}/offsets", summary="Committed offsets")
async def get_offsets(
    target: OwnedInstance, body: PartitionsBody, instances: Instances
) -> Response:
    partitions = _tps(body.partitions)
    found = await _run(instances, target, lambda c: c.committed(partitions))
    offsets = [
        {"topic": tp.topic, "partition": tp.partition, "offset": om.offset, "metadata": om.metadata}
        for tp, om in found.items()
        if om is not None
    ]
    return V2JSONResponse({"offsets": offsets})
