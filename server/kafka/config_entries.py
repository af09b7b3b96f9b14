"""Topic configs and broker settings as the entries of Kafka's config answers.

Pure: lakelog's config definitions and broker settings as the plain dicts
``server.kafka.build`` turns into DescribeConfigs and CreateTopics (v5+) entities.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from lakelog.topic_config import CONFIG_DEFS, TopicConfig
from server.settings import BrokerSettings, SettingValue, setting_values

#: Kafka's config sources (DescribeConfigs v1+): a topic override, a broker's
#: static setting, a built-in default.
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

#: Kafka's config types (DescribeConfigs v3+), by lakelog's config kind.
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, PASSWORD = 1, 2, 3, 5, 6, 7, 9
TOPIC_CONFIG_TYPES = {
    "long": LONG,
    "int": INT,
    "double": DOUBLE,
    "list": LIST,
    "string": STRING,
    "boolean": BOOLEAN,
}

INT_MIN, INT_MAX = -(2**31), 2**31 - 1

#: Each topic config's broker-wide default in Kafka (its first server synonym): the name a
#: Kafka broker answers the topic default under.
TOPIC_DEFAULT_SYNONYMS = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "preallocate": "log.preallocate",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}

#: Kafka broker configs that are a lakelog setting under another name.
KAFKA_SETTING_NAMES = {
    "auto.create.topics.enable": "auto_create_topics_enable",
    "num.partitions": "num_partitions",
    "socket.request.max.bytes": "kafka_max_request_bytes",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "super.users": "super_users",
    "allow.everyone.if.no.acl.found": "allow_everyone_if_no_acl_found",
    "quota.window.num": "quota_window_num",
}

#: Kafka's value of a config whose lakelog setting is unset (no limit).
KAFKA_UNSET = {"group.max.size": str(INT_MAX)}

#: Kafka broker configs with one value on every lakelog broker: each partition has one
#: replica (the storage root keeps the copies).
KAFKA_FIXED = {
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
}


def topic_entries(
    config: TopicConfig,
    names: Collection[str] | None = None,
    *,
    synonyms: bool = False,
    documentation: bool = False,
) -> list[dict[str, Any]]:
    """A topic's configs (those in ``names``; all when None); names it lacks are left out.

    Topic configs can be altered, so none is read-only. The synonyms are the
    override (if any) then the default, the order Kafka lists them in.
    """
    entries = []
    for described in config.describe():
        name = described["name"]
        if names is not None and name not in names:
            continue
        definition = CONFIG_DEFS[name]
        overridden = not described["is_default"]
        default = TopicConfig().text(name)
        default_name = TOPIC_DEFAULT_SYNONYMS.get(name, name)
        chain = [{"name": default_name, "value": default, "source": DEFAULT_CONFIG}]
        if overridden:
            chain.insert(0, {"name": name, "value": described["value"], "source": TOPIC_CONFIG})
        entries.append(
            {
                "name": name,
                "value": described["value"],
                "read_only": False,
                "is_default": not overridden,
                "config_source": TOPIC_CONFIG if overridden else DEFAULT_CONFIG,
                "is_sensitive": False,
                "synonyms": chain if synonyms else [],
                "config_type": TOPIC_CONFIG_TYPES[definition.kind],
                "documentation": definition.doc if documentation else None,
            }
        )
    return entries


def broker_entries(
    settings: BrokerSettings,
    names: Collection[str] | None = None,
    *,
    synonyms: bool = False,
    documentation: bool = False,
    kafka: Collection[SettingValue] = (),
) -> list[dict[str, Any]]:
    """A broker's settings by their lakelog names, then ``kafka`` (``kafka_settings``): all
    read-only, fixed when it starts.

    Secrets are answered as sensitive with no value, as Kafka answers passwords.
    """
    entries = []
    for setting in [*setting_values(settings), *kafka]:
        if names is not None and setting.name not in names:
            continue
        value = None if setting.sensitive or setting.value is None else _text(setting.value)
        source = DEFAULT_CONFIG if setting.default else STATIC_BROKER_CONFIG
        entries.append(
            {
                "name": setting.name,
                "value": value,
                "read_only": True,
                "is_default": setting.default,
                "config_source": source,
                "is_sensitive": setting.sensitive,
                "synonyms": (
                    [{"name": setting.name, "value": value, "source": source}] if synonyms else []
                ),
                "config_type": PASSWORD if setting.sensitive else _setting_type(setting.value),
                "documentation": setting.description if documentation else None,
            }
        )
    return entries


def kafka_settings(
    settings: BrokerSettings, node: int, listeners: str, advertised_listeners: str
) -> list[SettingValue]:
    """The broker configs Kafka's tools ask for by Kafka's names, with lakelog's values:
    identity and listeners, the lakelog settings Kafka names otherwise, one replica per
    partition, and the topic defaults under their broker-wide names."""
    own = {s.name: s for s in setting_values(settings)}
    values = [
        SettingValue("node.id", node, own["broker_id"].default, False, None),
        SettingValue("broker.id", node, own["broker_id"].default, False, None),
        SettingValue("log.dirs", settings.root, own["root"].default, False, "The storage root."),
        SettingValue("listeners", listeners, own["kafka_listeners"].default, False, None),
        SettingValue(
            "advertised.listeners",
            advertised_listeners,
            own["kafka_advertised_listeners"].default,
            False,
            None,
        ),
    ]
    for kafka_name, name in KAFKA_SETTING_NAMES.items():
        setting = own[name]
        value = KAFKA_UNSET.get(kafka_name) if setting.value is None else setting.value
        values.append(SettingValue(kafka_name, value, setting.default, False, f"lakelog's {name}."))
    values += [SettingValue(name, value, True, False, None) for name, value in KAFKA_FIXED.items()]
    defaults = TopicConfig()
    for topic_name, broker_name in TOPIC_DEFAULT_SYNONYMS.items():
        if topic_name in CONFIG_DEFS and broker_name != topic_name:
            value = defaults.get(topic_name)
            if not isinstance(value, (bool, int, float)):
                value = defaults.text(topic_name)
            values.append(SettingValue(broker_name, value, True, False, None))
    return values


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _setting_type(value: object) -> int:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INT if INT_MIN <= value <= INT_MAX else LONG
    if isinstance(value, float):
        return DOUBLE
    return STRING
