"""Option parsing and offset resolution (pure: no Spark, no storage)."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidConfigError, OffsetOutOfRangeError
from lakelog.offset_index import Segment
from lakelog.structs import TopicPartition as TP
from spark_connector.offsets import check_end, check_start, resolve
from spark_connector.options import (
    Assign,
    Earliest,
    GlobalTimestamp,
    Latest,
    PartitionTimestamps,
    SpecificOffsets,
    StorageSpec,
    Subscribe,
    SubscribePattern,
    parse_read_options,
    parse_write_options,
)
from spark_connector.planning import PartitionSnapshot

ROOT = {"root": "/data/lakelog"}


def batch(**options: str) -> dict[str, str]:
    return {**ROOT, **options}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "one of the options 'subscribe', 'subscribePattern' or 'assign' is required"),
        (
            {"subscribe": "a", "assign": '{"a":[0]}'},
            "options 'subscribe' and 'assign' were both given",
        ),
        ({"assign": "{nope"}, "option 'assign': not valid JSON"),
        ({"assign": '{"a": 3}'}, "option 'assign': topic 'a': expected a non-empty list"),
        ({"assign": '{"a": [-1]}'}, "option 'assign': topic 'a': -1 is not a partition number"),
        ({"assign": "[]"}, "option 'assign': expected a JSON object"),
        ({"subscribe": " , "}, "option 'subscribe': no topic names"),
        ({"subscribePattern": "(("}, "option 'subscribePattern': invalid regular expression"),
        (
            {"subscribe": "a", "startingOffsets": '{"a": {"0": 1'},
            "option 'startingOffsets': not valid JSON",
        ),
        ({"subscribe": "a", "startingOffsets": "first"}, "option 'startingOffsets': expected"),
        (
            {"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'},
            "option 'startingOffsets': partition 'x' of topic 'a' is not a partition number",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'},
            "option 'startingOffsets': a-0: -3 is not valid",
        ),
        (
            {"subscribe": "a", "startingOffsets": "latest"},
            "option 'startingOffsets': 'latest' (-1) is not allowed as the start of a batch",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'},
            "option 'startingOffsets': 'latest' (-1) is not allowed",
        ),
        (
            {"subscribe": "a", "endingOffsets": "earliest"},
            "option 'endingOffsets': 'earliest' (-2) is not allowed as the end",
        ),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "option 'startingTimestamp'"),
        ({"subscribe": "a", "includeHeaders": "yes"}, "option 'includeHeaders': expected true"),
        ({"subscribe": "a", "failOnDataLoss": "0"}, "option 'failOnDataLoss': expected true"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "abc"}, "option 'maxOffsetsPerTrigger'"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "option 'maxOffsetsPerTrigger'"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "-5"}, "expected a positive integer"),
        ({"subscribe": "a", "maxRecordsPerPartition": "1e6"}, "option 'maxRecordsPerPartition'"),
        (
            {"subscribe": "a", "maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "20"},
            "option 'minOffsetsPerTrigger': 20 is larger than maxOffsetsPerTrigger=10",
        ),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, "option 'maxTriggerDelay'"),
        (
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "nearest"},
            "option 'startingOffsetsByTimestampStrategy'",
        ),
    ],
)
def test_bad_read_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        parse_read_options(batch(**options), streaming=False)
    assert message in str(info.value)


def test_root_is_required() -> None:
    with pytest.raises(InvalidConfigError, match="option 'root': required"):
        parse_read_options({"subscribe": "a"}, streaming=False)
    # load(path) passes the root as "path"
    assert parse_read_options({"path": "/r", "subscribe": "a"}, False).storage.url == "/r"


def test_ending_offsets_are_refused_in_a_stream() -> None:
    with pytest.raises(
        InvalidConfigError, match="option 'endingOffsets': is not valid in a stream"
    ):
        parse_read_options(batch(subscribe="a", endingOffsets="latest"), streaming=True)
    # ... while latest is the streaming default and allowed
    opts = parse_read_options(batch(subscribe="a", startingOffsets="latest"), streaming=True)
    assert isinstance(opts.starting and opts.starting.spec, Latest)
    assert isinstance(opts.default_start, Latest)


def test_subscriptions_and_defaults() -> None:
    opts = parse_read_options(batch(subscribe="a, b,a"), streaming=False)
    assert opts.subscription == Subscribe(("a", "b"))
    assert isinstance(opts.default_start, Earliest)
    assert opts.max_records_per_partition == 1_000_000
    assert opts.fail_on_data_loss and not opts.include_headers
    pattern = parse_read_options(batch(subscribePattern="orders\\..*"), streaming=False)
    assert isinstance(pattern.subscription, SubscribePattern)
    assert pattern.subscription.matches("orders.eu")
    assert not pattern.subscription.matches("xorders.eu")  # whole-name match, as in Spark
    assigned = parse_read_options(batch(assign='{"b": [2, 0], "a": [1]}'), streaming=False)
    assert assigned.subscription == Assign((("a", (1,)), ("b", (0, 2))))


def test_option_names_are_case_insensitive() -> None:
    opts = parse_read_options(
        {"ROOT": "/r", "SUBSCRIBE": "a", "maxoffsetspertrigger": "7", "IncludeHeaders": "TRUE"},
        streaming=True,
    )
    assert opts.max_offsets_per_trigger == 7 and opts.include_headers


def test_offset_bounds_and_precedence() -> None:
    opts = parse_read_options(
        batch(
            subscribe="a",
            startingOffsets='{"a": {"0": 23, "1": -2}}',
            endingOffsets='{"a": {"0": -1}}',
        ),
        streaming=False,
    )
    assert opts.starting is not None and opts.ending is not None
    assert opts.starting.spec == SpecificOffsets(((TP("a", 0), 23), (TP("a", 1), -2)))
    assert opts.ending.option == "endingOffsets"
    # Spark's precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    both = parse_read_options(
        batch(
            subscribe="a",
            startingTimestamp="1000",
            startingOffsetsByTimestamp='{"a": {"0": 5}}',
            startingOffsets="earliest",
        ),
        streaming=False,
    )
    assert both.starting is not None and both.starting.spec == GlobalTimestamp(1000)
    by_ts = parse_read_options(
        batch(subscribe="a", startingOffsetsByTimestamp='{"a": {"0": 5}}'), streaming=False
    )
    assert by_ts.starting is not None
    assert by_ts.starting.spec == PartitionTimestamps(((TP("a", 0), 5),))


@pytest.mark.parametrize(
    ("text", "ms"), [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("2 hours", 7_200_000)]
)
def test_durations(text: str, ms: int) -> None:
    opts = parse_read_options(batch(subscribe="a", maxTriggerDelay=text), streaming=True)
    assert opts.max_trigger_delay_ms == ms


def test_s3_settings_from_options_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    given = parse_read_options(
        {
            "root": "s3://bucket/x",
            "subscribe": "a",
            "s3.endpoint": "http://opt:9000",
            "s3.accessKeyId": "opt-key",
            "s3.secretAccessKey": "opt-secret",
            "s3.region": "eu-west-1",
        },
        streaming=False,
    ).storage.s3_settings()
    assert given is not None
    assert (given.endpoint_url, given.access_key_id, given.region) == (
        "http://opt:9000",
        "opt-key",
        "eu-west-1",
    )
    assert given.secret_access_key == "opt-secret"
    env = StorageSpec("s3://bucket/x").s3_settings()
    assert env is not None
    assert (env.endpoint_url, env.access_key_id) == ("http://env:9000", "env-key")
    assert StorageSpec("/local/root").s3_settings() is None
    assert "opt-secret" not in repr(StorageSpec("s3://b", secret_access_key="opt-secret"))


def test_write_options() -> None:
    opts = parse_write_options({"root": "/r", "topic": "out", "checkpointLocation": "/ck"})
    assert (opts.topic, opts.checkpoint_location, opts.writer_id) == ("out", "/ck", None)
    with pytest.raises(InvalidConfigError, match="option 'topic': must not be empty"):
        parse_write_options({"root": "/r", "topic": " "})
    with pytest.raises(InvalidConfigError, match="option 'root'"):
        parse_write_options({"topic": "t"})


# -- resolving offsets -------------------------------------------------------


def snap(topic: str, partition: int, log_start: int, hwm: int) -> PartitionSnapshot:
    segments = (Segment(log_start, hwm - 1, f"s{partition}", partition, num_records=hwm),)
    return PartitionSnapshot(topic, "tbl", partition, log_start, hwm, segments if hwm else ())


SNAPS = [snap("a", 0, 0, 100), snap("a", 1, 40, 50)]


def no_lookup(topic: str, partition: int, ts: int) -> int | None:
    raise AssertionError("no timestamp lookup expected")


def bound(name: str, value: str, streaming: bool = False) -> object:
    opts = parse_read_options(batch(subscribe="a", **{name: value}), streaming=streaming)
    return opts.starting if name.startswith("starting") else opts.ending


def test_resolve_earliest_latest_and_json() -> None:
    assert resolve(None, Earliest(), SNAPS, no_lookup, is_start=True) == {
        ("a", 0): 0,
        ("a", 1): 40,
    }
    assert resolve(None, Latest(), SNAPS, no_lookup, is_start=False) == {
        ("a", 0): 100,
        ("a", 1): 50,
    }
    start = bound("startingOffsets", '{"a": {"0": 23}}')
    got = resolve(start, Earliest(), SNAPS, no_lookup, is_start=True)  # type: ignore[arg-type]
    assert got == {("a", 0): 23, ("a", 1): 40}  # unnamed partitions take the default
    end = bound("endingOffsets", '{"a": {"1": -1, "0": 60}}')
    assert resolve(end, Latest(), SNAPS, no_lookup, is_start=False) == {  # type: ignore[arg-type]
        ("a", 0): 60,
        ("a", 1): 50,
    }


def test_resolve_refuses_unknown_partitions_in_json() -> None:
    start = bound("startingOffsets", '{"a": {"7": 1}, "b": {"0": 1}}')
    with pytest.raises(InvalidConfigError) as info:
        resolve(start, Earliest(), SNAPS, no_lookup, is_start=True)  # type: ignore[arg-type]
    assert "option 'startingOffsets': names partitions that are not subscribed" in str(info.value)
    assert "a-7, b-0" in str(info.value)


def test_resolve_timestamps() -> None:
    calls: list[tuple[str, int, int]] = []

    def lookup(topic: str, partition: int, ts: int) -> int | None:
        calls.append((topic, partition, ts))
        return 10 if partition == 0 else None

    start = bound("startingTimestamp", "5000")
    with pytest.raises(InvalidConfigError, match="no record of a-1 has a timestamp at or after"):
        resolve(start, Earliest(), SNAPS, lookup, is_start=True)  # type: ignore[arg-type]
    got = resolve(
        start,  # type: ignore[arg-type]
        Earliest(),
        SNAPS,
        lookup,
        is_start=True,
        timestamp_strategy="latest",
    )
    assert got == {("a", 0): 10, ("a", 1): 50}
    end = bound("endingOffsetsByTimestamp", '{"a": {"1": 7}}')
    assert resolve(end, Latest(), SNAPS, lookup, is_start=False) == {  # type: ignore[arg-type]
        ("a", 0): 100,  # not named: latest
        ("a", 1): 50,  # nothing that recent: the end of the partition
    }
    assert ("a", 1, 7) in calls


def test_check_start_and_end() -> None:
    starts = {TP("a", 0): 0, TP("a", 1): 10}
    with pytest.raises(OffsetOutOfRangeError) as info:
        check_start(starts, SNAPS, "startingOffsets", fail_on_data_loss=True)
    text = str(info.value)
    assert "option 'startingOffsets' asks for offset 10 of a-1" in text
    assert "offsets 10..39 are no longer in the log" in text and "failOnDataLoss=false" in text
    skipped = check_start(starts, SNAPS, "startingOffsets", fail_on_data_loss=False)
    assert skipped == {TP("a", 0): 0, TP("a", 1): 40}
    with pytest.raises(OffsetOutOfRangeError, match="offset 101 of a-0 is past its end"):
        check_start({TP("a", 0): 101, TP("a", 1): 40}, SNAPS, "startingOffsets", True)
    with pytest.raises(InvalidConfigError, match="a-0 would end at 5, before its start offset 9"):
        check_end(
            {TP("a", 0): 9, TP("a", 1): 40}, {TP("a", 0): 5, TP("a", 1): 50}, SNAPS, "endingOffsets"
        )
    with pytest.raises(OffsetOutOfRangeError, match="option 'endingOffsets': offset 51 of a-1"):
        check_end(
            {TP("a", 0): 0, TP("a", 1): 40}, {TP("a", 0): 5, TP("a", 1): 51}, SNAPS, "endingOffsets"
        )


def test_view_names() -> None:
    from spark_connector.sql import view_name, view_names

    assert view_name("orders") == "orders"
    assert view_name("orders.v2-eu") == "orders_v2_eu"
    assert view_name("2024-events") == "t_2024_events"
    assert view_name("x", prefix="raw_") == "raw_x"
    assert view_names(["a.b", "c"]) == {"a.b": "a_b", "c": "c"}
    with pytest.raises(InvalidConfigError, match=r"topics 'a\.b' and 'a_b' would both be the view"):
        view_names(["a.b", "a_b"])
    with pytest.raises(InvalidConfigError, match="would both be the view"):
        view_names(["Orders", "orders"])  # Spark resolves view names case-insensitively
