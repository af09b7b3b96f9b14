"""Topic configs and broker settings as the entries of Kafka's config answers.

Pure: lakelog's config definitions and broker settings as the plain dicts
``server.kafka.build`` turns into DescribeConfigs and CreateTopics (v5+) entities.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from lakelog.topic_config import CONFIG_DEFS, TopicConfig
from server.settings import BrokerSettings, setting_values

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
        chain = [{"name": name, "value": default, "source": DEFAULT_CONFIG}]
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
) -> list[dict[str, Any]]:
    """A broker's settings by their lakelog names, read-only (fixed when it starts).

    Secrets are answered as sensitive with no value, as Kafka answers passwords.
    """
    entries = []
    for setting in setting_values(settings):
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
