"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic configs and broker settings.

Topics (resource type 2) go through the catalog, as over HTTP; a broker (type
4) answers only for itself, read-only. The rules are in docs/kafka-protocol.md,
"Admin APIs"; ACLs are on the topic or, for a broker, on the cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from lakelog.errors import InvalidConfigError, InvalidRequestError
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.topic_config import CONFIG_DEFS, TopicConfig
from server.kafka.authorization import require
from server.kafka.cluster import node_id
from server.kafka.config_entries import broker_entries, kafka_settings, topic_entries
from server.kafka.context import RequestContext
from server.kafka.error_codes import answered, check_configs, refuse_repeated, repeated
from server.kafka.listeners import listeners_to_bind

#: Kafka's config resource types.
TOPIC = 2
BROKER = 4
RESOURCE_TYPE_NAMES = {
    TOPIC: "TOPIC",
    BROKER: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}

#: Kafka's incremental config operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _type_name(resource_type: int) -> str:
    return RESOURCE_TYPE_NAMES.get(resource_type, str(resource_type))


def _require_configs(ctx: RequestContext, operation: Operation, kind: int, name: str) -> None:
    """The ACL of a config resource: the topic itself, or the cluster for a broker."""
    if kind == TOPIC:
        require(ctx, operation, ResourceType.TOPIC, name)
    elif kind == BROKER:
        require(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


#: Answers one resource (its type, name and request entry): the answer's further fields.
Act = Callable[[int, str, Any], Awaitable[dict[str, Any]]]


async def _each_resource(
    resources: Any, verb: str, act: Act, twice: frozenset[tuple[int, str]] = frozenset()
) -> list[dict[str, Any]]:
    """Each resource answered on its own; those in ``twice`` are INVALID_REQUEST."""
    results = []
    for resource in resources:
        kind, name = int(resource.resource_type), resource.resource_name
        answer: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": kind,
            "resource_name": name,
            "configs": [],  # DescribeConfigs only; the other layouts drop it
        }
        with answered(answer, f"{verb} configs of {_type_name(kind)} {name!r}"):
            if (kind, name) in twice:
                raise refuse_repeated(f"{_type_name(kind)} {name!r}")
            answer.update(await act(kind, name, resource))
        results.append(answer)
    return results


async def describe_configs(ctx: RequestContext, body: Any) -> Any:
    synonyms = bool(body.include_synonyms)
    documentation = bool(getattr(body, "include_documentation", False))

    async def describe(kind: int, name: str, resource: Any) -> dict[str, Any]:
        keys = resource.configuration_keys
        wanted = None if keys is None else frozenset(keys)
        _require_configs(ctx, Operation.DESCRIBE_CONFIGS, kind, name)
        if kind == TOPIC:
            described = await asyncio.to_thread(ctx.broker.catalog.describe_topic, name)
            entries = topic_entries(
                described.config, wanted, synonyms=synonyms, documentation=documentation
            )
        elif kind == BROKER and name == "":
            entries = []  # the cluster-wide dynamic defaults: lakelog has none
        elif kind == BROKER:
            own = node_id(ctx.broker.settings.broker_id)
            if name != str(own):
                raise InvalidRequestError(
                    f"broker {name!r}: this broker is node {own}; ask each broker about its own "
                    "settings (or give an empty name for the cluster-wide defaults)"
                )
            settings = ctx.broker.settings
            kafka = kafka_settings(
                settings,
                own,
                ",".join(f"{item.name}://{item.address}" for item in listeners_to_bind(settings)),
                ",".join(
                    f"{name}://{address}"
                    for name, address in ctx.broker.registry.kafka_addresses.items()
                ),
            )
            entries = broker_entries(
                settings, wanted, synonyms=synonyms, documentation=documentation, kafka=kafka
            )
        else:
            raise InvalidRequestError(
                f"config resource type {_type_name(kind)}: only TOPIC (2) and BROKER (4) "
                "have configs"
            )
        return {"configs": entries}

    return ctx.response(results=await _each_resource(body.resources, "describe", describe))


#: From a topic's current config and a resource's config entries: overrides to set, to remove.
Resolver = Callable[[TopicConfig, Any], tuple[dict[str, str], list[str]]]


async def incremental_alter_configs(ctx: RequestContext, body: Any) -> Any:
    return ctx.response(responses=await _alter_each(ctx, body, resolve_changes))


async def alter_configs(ctx: RequestContext, body: Any) -> Any:
    """Kafka's older AlterConfigs: the entries given become the topic's overrides, all of them."""
    return ctx.response(responses=await _alter_each(ctx, body, resolve_replacement))


async def _alter_each(ctx: RequestContext, body: Any, resolve: Resolver) -> list[dict[str, Any]]:
    catalog = ctx.broker.catalog

    async def alter(kind: int, name: str, resource: Any) -> dict[str, Any]:
        _require_configs(ctx, Operation.ALTER_CONFIGS, kind, name)
        if kind == BROKER:
            raise InvalidRequestError(
                f"broker {name!r}: broker settings are read-only (fixed when the broker "
                "starts, from its flags, environment or settings file)"
            )
        if kind != TOPIC:
            raise InvalidRequestError(
                f"config resource type {_type_name(kind)}: only topic configs can be altered"
            )
        # Every change is checked against the topic's current config, then committed at once.
        current = (await asyncio.to_thread(catalog.describe_topic, name)).config
        set_configs, delete = resolve(current, resource.configs)
        current.with_changes(set_configs, delete)  # INVALID_CONFIG names the config at fault
        if not body.validate_only:
            await asyncio.to_thread(catalog.alter_topic_configs, name, set_configs, delete)
        return {}

    twice = repeated((int(r.resource_type), r.resource_name) for r in body.resources)
    return await _each_resource(body.resources, "alter", alter, twice)


def resolve_replacement(current: TopicConfig, entries: Any) -> tuple[dict[str, str], list[str]]:
    """AlterConfigs: set the entries with a value, reset every other override. Pure."""
    check_configs(entries)
    set_configs = {e.name: e.value for e in entries if e.value is not None}
    return set_configs, [name for name in current.overrides if name not in set_configs]


def resolve_changes(current: TopicConfig, changes: Any) -> tuple[dict[str, str], list[str]]:
    """The overrides to set and to remove for a resource's operations. Pure."""
    check_configs(changes)
    set_configs: dict[str, str] = {}
    delete: list[str] = []
    for change in changes:
        operation = int(change.config_operation)
        if operation == SET:
            if change.value is None:
                raise InvalidRequestError(f"SET of config {change.name} needs a value (not null)")
            set_configs[change.name] = change.value
        elif operation == DELETE:
            delete.append(change.name)
        elif operation in (APPEND, SUBTRACT):
            set_configs[change.name] = _list_change(current, change.name, operation, change.value)
        else:
            raise InvalidRequestError(
                f"config {change.name}: unknown operation {operation} "
                "(0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)"
            )
    return set_configs, delete


def _list_change(current: TopicConfig, name: str, operation: int, value: str | None) -> str:
    definition = CONFIG_DEFS.get(name)
    verb = "APPEND" if operation == APPEND else "SUBTRACT"
    if definition is None:
        raise InvalidConfigError(
            f"unknown topic config {name!r}; known configs: {', '.join(sorted(CONFIG_DEFS))}"
        )
    if definition.kind != "list":
        raise InvalidConfigError(f"{verb} applies to list configs only; {name} is not a list")
    items = [v.strip() for v in (value or "").split(",") if v.strip()]
    present = str(current.get(name)).split(",")
    if operation == APPEND:
        result = present + [v for v in items if v not in present]
    else:
        result = [v for v in present if v not in items]
    if not result:
        raise InvalidConfigError(f"SUBTRACT would leave config {name} empty; DELETE resets it")
    return ",".join(result)
