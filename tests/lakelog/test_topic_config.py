"""Tests for lakelog.topic_config: Kafka's topic-name rules and topic configs."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lakelog.errors import InvalidConfigError, InvalidTopicError
from lakelog.topic_config import (
    CONFIG_DEFS,
    LONG_MAX,
    MAX_TOPIC_NAME_LENGTH,
    ConfigDef,
    TopicConfig,
    validate_topic_name,
)

LEGAL_CHARS = string.ascii_letters + string.digits + "._-"

valid_names = st.text(alphabet=LEGAL_CHARS, min_size=1, max_size=MAX_TOPIC_NAME_LENGTH).filter(
    lambda name: name not in (".", "..")
)
illegal_chars = st.characters(codec="utf-8").filter(lambda c: c not in LEGAL_CHARS)


# --- topic names -------------------------------------------------------------


@settings(max_examples=200)
@given(name=valid_names)
def test_every_valid_name_passes(name: str) -> None:
    assert validate_topic_name(name) == name


@settings(max_examples=200)
@given(
    prefix=st.text(alphabet=LEGAL_CHARS, max_size=20),
    bad=illegal_chars,
    suffix=st.text(alphabet=LEGAL_CHARS, max_size=20),
)
def test_any_illegal_character_fails(prefix: str, bad: str, suffix: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(prefix + bad + suffix)


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../x",
        "a/b",
        "a\\b",
        "topic\n",  # ``$`` in a regex also matches before a final newline
        "\ntopic",
        "to pic",
        "tøpic",
        "topic\x00",
        "x" * (MAX_TOPIC_NAME_LENGTH + 1),
    ],
)
def test_invalid_names_rejected(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


@pytest.mark.parametrize("name", [None, 1, b"topic", ["topic"], 1.5])
def test_non_string_names_rejected(name: object) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


@pytest.mark.parametrize(
    "name", ["a", "...", ".a", "__consumer_offsets", "A-b_c.9", "x" * MAX_TOPIC_NAME_LENGTH]
)
def test_edge_valid_names(name: str) -> None:
    assert validate_topic_name(name) == name


def test_invalid_topic_error_is_kafkas() -> None:
    with pytest.raises(InvalidTopicError) as caught:
        validate_topic_name("a/b")
    assert caught.value.code == 17
    assert caught.value.name == "INVALID_TOPIC_EXCEPTION"
    assert "a/b" in caught.value.message


# --- configs -------------------------------------------------------------------

KAFKA_DEFAULTS: dict[str, object] = {
    "cleanup.policy": "delete",
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 9223372036854775807,
    "delete.retention.ms": 86400000,
    "min.cleanable.dirty.ratio": 0.5,
    "max.message.bytes": 1048588,
    "message.timestamp.type": "CreateTime",
    "confluent.key.schema.validation": False,
    "confluent.value.schema.validation": False,
    "confluent.key.subject.name.strategy": (
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    ),
    "confluent.value.subject.name.strategy": (
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    ),
    "lakelog.schema.validation.dead.letter.topic": "",
    # Kafka's, stored and described with no effect in lakelog:
    "compression.type": "producer",
    "compression.gzip.level": -1,
    "compression.lz4.level": 9,
    "compression.zstd.level": 3,
    "file.delete.delay.ms": 60000,
    "flush.messages": 9223372036854775807,
    "flush.ms": 9223372036854775807,
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
    "index.interval.bytes": 4096,
    "segment.index.bytes": 10485760,
    "segment.jitter.ms": 0,
    "local.retention.bytes": -2,
    "local.retention.ms": -2,
    "remote.storage.enable": False,
    "remote.log.copy.disable": False,
    "remote.log.delete.on.disable": False,
    "remote.copy.lag.ms": 0,
    "remote.copy.lag.bytes": 0,
    "message.timestamp.before.max.ms": 9223372036854775807,
    "message.timestamp.after.max.ms": 3600000,
    "min.insync.replicas": 1,
    "preallocate": False,
    "unclean.leader.election.enable": False,
}


def test_defaults_match_kafka() -> None:
    assert set(CONFIG_DEFS) == set(KAFKA_DEFAULTS)
    config = TopicConfig()
    for name, expected in KAFKA_DEFAULTS.items():
        assert CONFIG_DEFS[name].default == expected, name
        assert config.get(name) == expected, name
        assert type(config.get(name)) is type(expected), name
    assert config.overrides == {}
    assert config.cleanup_policy == frozenset({"delete"})
    assert not config.compacted
    assert not config.log_append_time
    assert config.max_message_bytes == 1048588


def test_kafka_configs_without_effect_are_checked_stored_and_described() -> None:
    config = TopicConfig({"compression.type": "lz4", "min.insync.replicas": "2"})
    assert config.text("compression.type") == "lz4"
    described = {d["name"]: d for d in config.describe()}
    assert described["min.insync.replicas"]["value"] == "2"
    assert not described["min.insync.replicas"]["is_default"]
    assert not CONFIG_DEFS["compression.type"].applies
    assert CONFIG_DEFS["retention.ms"].applies
    with pytest.raises(InvalidConfigError, match=r"compression\.type"):
        TopicConfig({"compression.type": "brotli"})
    with pytest.raises(InvalidConfigError, match=r"min\.insync\.replicas"):
        TopicConfig({"min.insync.replicas": "0"})


def test_every_default_parses_to_itself() -> None:
    for definition in CONFIG_DEFS.values():
        assert definition.parse(str(definition.default)) == definition.default


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("retention.ms", "abc"),
        ("retention.ms", "1.5"),
        ("retention.ms", "1e3"),
        ("retention.ms", ""),
        ("retention.ms", "   "),
        ("retention.ms", "-2"),
        ("retention.ms", str(LONG_MAX + 1)),
        ("retention.ms", True),
        ("retention.bytes", "-2"),
        ("segment.bytes", "13"),
        ("segment.bytes", str(2**31)),
        ("segment.bytes", "lots"),
        ("segment.ms", "0"),
        ("min.compaction.lag.ms", "-1"),
        ("max.compaction.lag.ms", "0"),
        ("delete.retention.ms", "-1"),
        ("max.message.bytes", "-1"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "1.0000001"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("min.cleanable.dirty.ratio", "half"),
        ("min.cleanable.dirty.ratio", "nan"),
        ("min.cleanable.dirty.ratio", "inf"),
        ("cleanup.policy", "foo"),
        ("cleanup.policy", "compact,foo"),
        ("cleanup.policy", ","),
        ("cleanup.policy", ""),
        ("message.timestamp.type", "createtime"),
        ("message.timestamp.type", "NoTime"),
        ("confluent.value.schema.validation", "yes"),
        ("confluent.key.schema.validation", "1"),
        ("confluent.value.subject.name.strategy", "TopicNameStrategy"),
        ("lakelog.schema.validation.dead.letter.topic", "bad/name"),
    ],
)
def test_invalid_values_raise_naming_the_config(name: str, raw: object) -> None:
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")) as caught:
        TopicConfig({name: raw})  # type: ignore[dict-item]
    assert caught.value.code == 40
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        CONFIG_DEFS[name].parse(raw)
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        TopicConfig().with_changes({name: raw})


def test_schema_validation_configs_parse_as_kafka_writes_them() -> None:
    config = TopicConfig(
        {
            "confluent.value.schema.validation": "TRUE",
            "lakelog.schema.validation.dead.letter.topic": " orders-dlq ",
        }
    )
    assert config.overrides["confluent.value.schema.validation"] == "true"
    assert config.get("confluent.value.schema.validation") is True
    assert config.validates_schemas
    assert config.dead_letter_topic == "orders-dlq"
    described = {c["name"]: c["value"] for c in config.describe()}
    assert described["confluent.value.schema.validation"] == "true"
    assert described["confluent.key.schema.validation"] == "false"
    assert not TopicConfig().validates_schemas
    assert TopicConfig().dead_letter_topic == ""


def test_unknown_config_names_raise_naming_it() -> None:
    with pytest.raises(InvalidConfigError, match=r"retention\.millis"):
        TopicConfig({"retention.millis": "1"})
    with pytest.raises(InvalidConfigError, match=r"flush\.millis"):
        TopicConfig().with_changes({"flush.millis": 5})
    with pytest.raises(InvalidConfigError, match=r"flush\.millis"):
        TopicConfig().with_changes({}, ["flush.millis"])


@pytest.mark.parametrize(
    ("lo", "hi", "ok"),
    [("0", "1", True), ("5", "5", True), ("6", "5", False), (str(LONG_MAX), None, True)],
)
def test_compaction_lag_bounds(lo: str, hi: str | None, ok: bool) -> None:
    overrides = {"min.compaction.lag.ms": lo}
    if hi is not None:
        overrides["max.compaction.lag.ms"] = hi
    if ok:
        assert TopicConfig(overrides).get("min.compaction.lag.ms") == int(lo)
    else:
        with pytest.raises(InvalidConfigError, match=r"min\.compaction\.lag\.ms"):
            TopicConfig(overrides)


def test_compaction_lag_bounds_checked_across_changes() -> None:
    config = TopicConfig({"max.compaction.lag.ms": "100"})
    with pytest.raises(InvalidConfigError, match=r"max\.compaction\.lag\.ms"):
        config.with_changes({"min.compaction.lag.ms": 101})
    # Reverting the max to its default (LONG_MAX) makes the same min legal.
    relaxed = config.with_changes({"min.compaction.lag.ms": 101}, ["max.compaction.lag.ms"])
    assert relaxed.get("min.compaction.lag.ms") == 101
    assert relaxed.get("max.compaction.lag.ms") == LONG_MAX


@pytest.mark.parametrize(
    "raw", ["compact,delete", "delete,compact", " delete , compact ", "compact, delete,"]
)
def test_both_cleanup_policies_accepted_and_normalised(raw: str) -> None:
    config = TopicConfig({"cleanup.policy": raw})
    assert config.overrides == {"cleanup.policy": "compact,delete"}
    assert config.cleanup_policy == frozenset({"compact", "delete"})
    assert config.compacted


def test_compact_only() -> None:
    config = TopicConfig({"cleanup.policy": "compact"})
    assert config.cleanup_policy == frozenset({"compact"})
    assert config.compacted


def test_values_are_normalised() -> None:
    config = TopicConfig(
        {
            "retention.ms": " 1000 ",
            "min.cleanable.dirty.ratio": ".50",
            "message.timestamp.type": "LogAppendTime",
            "max.message.bytes": "+2048",
        }
    )
    assert config.overrides == {
        "retention.ms": "1000",
        "min.cleanable.dirty.ratio": "0.5",
        "message.timestamp.type": "LogAppendTime",
        "max.message.bytes": "2048",
    }
    assert config.get("retention.ms") == 1000
    assert config.get("min.cleanable.dirty.ratio") == 0.5
    assert config.log_append_time
    assert config.max_message_bytes == 2048


def test_with_changes_sets_and_reverts() -> None:
    base = TopicConfig({"retention.ms": "1000"})
    changed = base.with_changes({"retention.bytes": 4096, "cleanup.policy": "delete,compact"})
    assert changed.overrides == {
        "retention.ms": "1000",
        "retention.bytes": "4096",
        "cleanup.policy": "compact,delete",
    }
    assert base.overrides == {"retention.ms": "1000"}  # the original is untouched
    reverted = changed.with_changes({}, ["retention.ms", "cleanup.policy"])
    assert reverted.overrides == {"retention.bytes": "4096"}
    assert reverted.get("retention.ms") == KAFKA_DEFAULTS["retention.ms"]
    assert not reverted.compacted
    # Reverting a config that was never set is fine.
    assert reverted.with_changes({}, ["segment.ms"]).overrides == {"retention.bytes": "4096"}
    # Setting a config to its default value is still an override.
    explicit = TopicConfig().with_changes({"retention.bytes": -1})
    assert explicit.overrides == {"retention.bytes": "-1"}


def test_describe_lists_every_config_with_its_source() -> None:
    config = TopicConfig({"retention.ms": "1000", "min.cleanable.dirty.ratio": "0.25"})
    described = config.describe()
    assert [entry["name"] for entry in described] == list(CONFIG_DEFS)
    by_name = {entry["name"]: entry for entry in described}
    for name, expected in KAFKA_DEFAULTS.items():
        entry = by_name[name]
        if name == "retention.ms":
            assert entry == {
                "name": name,
                "value": "1000",
                "source": "TOPIC_CONFIG",
                "is_default": False,
            }
        elif name == "min.cleanable.dirty.ratio":
            assert (entry["value"], entry["source"], entry["is_default"]) == (
                "0.25",
                "TOPIC_CONFIG",
                False,
            )
        else:
            shown = str(expected).lower() if isinstance(expected, bool) else str(expected)
            assert entry == {
                "name": name,
                "value": shown,
                "source": "DEFAULT_CONFIG",
                "is_default": True,
            }


@settings(max_examples=100)
@given(value=st.integers(min_value=-1, max_value=LONG_MAX))
def test_long_values_in_range_round_trip(value: int) -> None:
    config = TopicConfig({"retention.ms": str(value), "retention.bytes": str(value)})
    assert config.get("retention.ms") == value
    assert config.get("retention.bytes") == value
    assert TopicConfig(config.overrides) == config


@settings(max_examples=100)
@given(value=st.integers(max_value=-2) | st.integers(min_value=LONG_MAX + 1))
def test_long_values_out_of_range_rejected(value: int) -> None:
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        TopicConfig({"retention.ms": str(value)})


@settings(max_examples=100)
@given(value=st.integers(min_value=14, max_value=2**31 - 1))
def test_int_values_in_range_round_trip(value: int) -> None:
    assert TopicConfig({"segment.bytes": str(value)}).get("segment.bytes") == value


@settings(max_examples=100)
@given(value=st.integers(max_value=13) | st.integers(min_value=2**31))
def test_int_values_out_of_range_rejected(value: int) -> None:
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        TopicConfig({"segment.bytes": str(value)})


@settings(max_examples=100)
@given(ratio=st.floats(min_value=0.0, max_value=1.0))
def test_ratio_in_range_round_trips(ratio: float) -> None:
    config = TopicConfig({"min.cleanable.dirty.ratio": str(ratio)})
    assert config.get("min.cleanable.dirty.ratio") == ratio


@settings(max_examples=100)
@given(ratio=st.floats(allow_nan=True).filter(lambda r: not 0.0 <= r <= 1.0))
def test_ratio_out_of_range_rejected(ratio: float) -> None:
    with pytest.raises(InvalidConfigError, match=r"min\.cleanable\.dirty\.ratio"):
        TopicConfig({"min.cleanable.dirty.ratio": str(ratio)})


@settings(max_examples=100)
@given(text=st.text(alphabet=string.ascii_letters + " ,", min_size=1, max_size=20))
def test_non_numeric_text_rejected_for_numbers(text: str) -> None:
    assume(text.strip().lower() not in ("nan", "inf", "infinity"))
    for name in ("retention.ms", "segment.bytes", "min.cleanable.dirty.ratio"):
        with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
            TopicConfig({name: text})


def test_config_def_parse_bounds_are_inclusive() -> None:
    definition = ConfigDef("x.y", "double", 0.5, "doc", minimum=0.0, maximum=1.0)
    assert definition.parse("0") == 0.0
    assert definition.parse("1") == 1.0
    with pytest.raises(InvalidConfigError, match=r"x\.y.*at most 1\.0"):
        definition.parse("1.01")
    with pytest.raises(InvalidConfigError, match=r"x\.y.*at least 0\.0"):
        definition.parse("-0.01")
