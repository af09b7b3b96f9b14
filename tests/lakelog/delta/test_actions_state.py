"""Tests for lakelog.delta.actions (JSON form) and lakelog.delta.state (replay)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.delta.actions import (
    Action,
    AddFile,
    CommitInfo,
    Metadata,
    OtherAction,
    Protocol,
    RemoveFile,
    Txn,
    action_from_json,
    decode_commit,
    encode_commit,
)
from lakelog.delta.state import (
    SUPPORTED_READER_FEATURES,
    SUPPORTED_WRITER_FEATURES,
    TableState,
    check_protocol,
)
from lakelog.errors import UnsupportedVersionError

# --- strategies -------------------------------------------------------------------

texts = st.text(max_size=20)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
optional_longs = st.none() | longs
string_maps = st.dictionaries(texts, texts, max_size=5)
partition_values = st.dictionaries(texts, st.none() | texts, max_size=4)
features = st.none() | st.lists(st.text(min_size=1, max_size=15), max_size=4).map(tuple)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | longs | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)

protocols = st.builds(
    Protocol,
    min_reader_version=st.integers(1, 5),
    min_writer_version=st.integers(1, 9),
    reader_features=features,
    writer_features=features,
)
metadatas = st.builds(
    Metadata,
    table_id=texts,
    name=st.none() | texts,
    schema_string=texts,
    partition_columns=st.lists(texts, max_size=3).map(tuple),
    configuration=string_maps,
    created_time=optional_longs,
    description=st.none() | texts,
)
adds = st.builds(
    AddFile,
    path=st.text(min_size=1, max_size=40),
    partition_values=partition_values,
    size=st.integers(0, 2**62),
    modification_time=st.integers(0, 2**62),
    data_change=st.booleans(),
    stats=st.none() | texts,
    tags=string_maps,
)
removes = st.builds(
    RemoveFile,
    path=st.text(min_size=1, max_size=40),
    deletion_timestamp=st.integers(0, 2**62),
    data_change=st.booleans(),
    partition_values=st.none() | partition_values,
    size=st.none() | st.integers(0, 2**62),
    tags=string_maps,
)
txns = st.builds(Txn, app_id=texts, version=longs, last_updated=optional_longs)
commit_infos = st.builds(CommitInfo, values=st.dictionaries(texts, json_values, max_size=5))
other_keys = st.sampled_from(["domainMetadata", "cdc", "checkpointMetadata", "sidecar", "x"])
others = st.builds(
    OtherAction, raw=st.dictionaries(other_keys, json_values, min_size=1, max_size=2)
)
actions: st.SearchStrategy[Action] = st.one_of(
    protocols, metadatas, adds, removes, txns, commit_infos, others
)


# --- JSON round trips -------------------------------------------------------------


@settings(max_examples=150)
@given(commit=st.lists(actions, max_size=8))
def test_commit_round_trip(commit: list[Action]) -> None:
    data = encode_commit(commit)
    assert decode_commit(data) == commit
    lines = data.split(b"\n")
    assert lines[-1] == b""  # every action line is terminated
    assert len(lines) == len(commit) + 1
    data.decode("ascii")  # non-ASCII text is escaped, so one line per action always


@settings(max_examples=200)
@given(add=adds)
def test_add_round_trip(add: AddFile) -> None:
    assert action_from_json(add.to_json()) == add
    assert action_from_json(json.loads(json.dumps(add.to_json()))) == add
    (decoded,) = decode_commit(encode_commit([add]))
    assert isinstance(decoded, AddFile)
    assert decoded.tags == add.tags
    assert decoded.partition_values == add.partition_values


@settings(max_examples=100)
@given(add=adds, when=st.integers(0, 2**62), data_change=st.booleans())
def test_remove_of_an_add_keeps_its_metadata(add: AddFile, when: int, data_change: bool) -> None:
    remove = add.remove(when, data_change=data_change)
    assert (remove.path, remove.size, remove.tags) == (add.path, add.size, add.tags)
    assert remove.partition_values == add.partition_values
    body = remove.to_json()["remove"]
    assert body["extendedFileMetadata"] is True
    assert body["deletionTimestamp"] == when
    assert decode_commit(encode_commit([remove])) == [remove]


@pytest.mark.parametrize(
    "action",
    [
        Protocol(),
        Protocol(3, 7, ("timestampNtz",), ("appendOnly", "timestampNtz")),
        Protocol(3, 7, (), ()),
        Metadata("id-1", None, '{"type":"struct","fields":[]}', ("partition",), {}),
        Metadata("id-2", "t", "{}", (), {"retention.ms": "1"}, 1700000000000, "d"),
        AddFile("p=0/a.parquet", {"partition": "0"}, 10, 20),
        AddFile("a b%20c.parquet", {"p": None}, 0, 0, False, '{"numRecords":1}', {"k": "v"}),
        RemoveFile("a.parquet", 5),
        RemoveFile("a.parquet", 5, False, {}, 0, {"k": "v"}),
        Txn("lakelog-p0", 7),
        Txn("lakelog-p0", 7, 1700000000000),
        CommitInfo({"operation": "WRITE", "operationParameters": {"mode": "Append"}}),
        OtherAction({"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}}),
    ],
)
def test_each_action_type_round_trips(action: Action) -> None:
    assert decode_commit(encode_commit([action])) == [action]


def test_json_field_names_are_deltas() -> None:
    add = AddFile("a.parquet", {"partition": "1"}, 3, 4, True, "{}", {"t": "1"})
    assert add.to_json() == {
        "add": {
            "path": "a.parquet",
            "partitionValues": {"partition": "1"},
            "size": 3,
            "modificationTime": 4,
            "dataChange": True,
            "stats": "{}",
            "tags": {"t": "1"},
        }
    }
    # Optional fields are left out rather than written as null.
    assert AddFile("b", {}, 0, 0).to_json() == {
        "add": {
            "path": "b",
            "partitionValues": {},
            "size": 0,
            "modificationTime": 0,
            "dataChange": True,
        }
    }
    assert RemoveFile("c", 9).to_json() == {
        "remove": {
            "path": "c",
            "deletionTimestamp": 9,
            "dataChange": True,
            "extendedFileMetadata": False,
        }
    }
    assert Txn("app", 2).to_json() == {"txn": {"appId": "app", "version": 2}}
    assert Protocol(1, 2).to_json() == {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    meta = Metadata("i", "n", "s", ("partition",), {"k": "v"}, 1, "d").to_json()["metaData"]
    assert meta["format"] == {"provider": "parquet", "options": {}}
    assert (meta["id"], meta["schemaString"], meta["partitionColumns"]) == ("i", "s", ["partition"])


def test_decode_commit_written_by_another_writer() -> None:
    """Lines as another Delta writer may produce them: missing optionals, extra fields."""
    lines: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": 1, "operation": "CREATE TABLE", "engineInfo": "other"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "abc",
                "format": {"provider": "parquet", "options": {"x": "y"}},
                "schemaString": "{}",
                "partitionColumns": None,
                "configuration": None,
            }
        },
        {"add": {"path": "f.parquet", "partitionValues": None, "size": None, "dataChange": False}},
        {"remove": {"path": "g.parquet"}},
        {"txn": {"appId": "a", "version": "3"}},
        {"domainMetadata": {"domain": "delta.rowTracking", "configuration": "{}"}},
    ]
    data = "\r\n".join(json.dumps(line) for line in lines).encode() + b"\n\n"
    decoded = decode_commit(data)
    assert [type(a) for a in decoded] == [
        CommitInfo,
        Protocol,
        Metadata,
        AddFile,
        RemoveFile,
        Txn,
        OtherAction,
    ]
    meta = decoded[2]
    assert isinstance(meta, Metadata)
    assert (meta.name, meta.partition_columns, meta.configuration) == (None, (), {})
    assert decoded[3] == AddFile("f.parquet", {}, 0, 0, data_change=False)
    assert decoded[4] == RemoveFile("g.parquet", 0)
    assert decoded[5] == Txn("a", 3)
    assert decoded[6] == OtherAction(lines[6])
    assert decode_commit(b"") == []
    assert decode_commit(b"\n  \n") == []


# --- protocol checks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 1),
        Protocol(1, 2),
        Protocol(1, 3),
        Protocol(3, 7, ("timestampNtz",), ("timestampNtz",)),
        Protocol(3, 7, (), ("appendOnly", "invariants", "checkConstraints")),
        Protocol(1, 7, None, tuple(sorted(SUPPORTED_WRITER_FEATURES))),
        Protocol(3, 7, tuple(SUPPORTED_READER_FEATURES), tuple(SUPPORTED_WRITER_FEATURES)),
    ],
)
def test_supported_protocols(protocol: Protocol) -> None:
    check_protocol(protocol)
    state = TableState()
    state.apply(0, [protocol])
    assert state.protocol == protocol


@pytest.mark.parametrize(
    ("protocol", "mentioned"),
    [
        (Protocol(4, 7), "4/7"),
        (Protocol(1, 8), "1/8"),
        (Protocol(2, 5), "columnMapping"),  # legacy reader 2 is column mapping
        (Protocol(1, 4), "writer version 4"),  # change data feed, generated columns
        (Protocol(1, 5), "writer version 5"),  # column mapping
        (Protocol(1, 6), "writer version 6"),  # identity columns
        (Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), "deletionVectors"),
        (Protocol(3, 7, ("columnMapping",), ("columnMapping",)), "columnMapping"),
        (Protocol(3, 7, ("v2Checkpoint",), ("v2Checkpoint", "appendOnly")), "v2Checkpoint"),
        (Protocol(1, 7, None, ("changeDataFeed", "appendOnly")), "changeDataFeed"),
        (Protocol(1, 7, None, ("rowTracking", "domainMetadata")), "domainMetadata"),
        (Protocol(3, 7, ("typeWidening",), ()), "typeWidening"),
    ],
)
def test_unsupported_protocols_refused(protocol: Protocol, mentioned: str) -> None:
    with pytest.raises(UnsupportedVersionError, match=mentioned) as caught:
        check_protocol(protocol)
    assert caught.value.code == 35
    state = TableState()
    with pytest.raises(UnsupportedVersionError):
        state.apply(0, [Protocol(1, 2), protocol])


@settings(max_examples=100)
@given(protocol=protocols)
def test_protocol_check_is_the_rule(protocol: Protocol) -> None:
    legacy_ok = protocol.min_reader_version in (1, 3) and protocol.min_writer_version in (
        1,
        2,
        3,
        7,
    )
    features_ok = (
        set(protocol.reader_features or ()) <= SUPPORTED_READER_FEATURES
        and set(protocol.writer_features or ()) <= SUPPORTED_WRITER_FEATURES
    )
    if legacy_ok and features_ok:
        check_protocol(protocol)
    else:
        with pytest.raises(UnsupportedVersionError):
            check_protocol(protocol)


# --- table state -------------------------------------------------------------------


def add(path: str, size: int = 1, partition: str = "0") -> AddFile:
    return AddFile(path, {"partition": partition}, size, 0)


def test_apply_adds_removes_and_returns_the_actions() -> None:
    state = TableState()
    assert (state.version, state.files, state.txns) == (-1, {}, {})
    first: list[Action] = [Protocol(1, 2), Metadata("id", None, "{}", (), {}), add("a"), add("b")]
    applied = state.apply(0, iter(first))
    assert applied == first
    assert state.version == 0
    assert sorted(state.files) == ["a", "b"]

    info = CommitInfo({"operation": "WRITE"})
    other = OtherAction({"domainMetadata": {"domain": "x"}})
    state.apply(1, [add("a").remove(5), add("c"), info, other])
    assert sorted(state.files) == ["b", "c"]
    # Removing a path that is not live is a no-op.
    state.apply(2, [RemoveFile("a", 6), RemoveFile("zzz", 6)])
    assert sorted(state.files) == ["b", "c"]
    # An add of a live path replaces the earlier add.
    state.apply(3, [add("b", size=99)])
    assert state.files["b"].size == 99
    assert len(state.files) == 2
    # Within a commit actions apply in order: remove then add leaves the file live.
    state.apply(4, [RemoveFile("c", 7), add("c", size=5)])
    assert state.files["c"].size == 5
    state.apply(5, [add("d"), RemoveFile("d", 8)])
    assert "d" not in state.files
    assert state.version == 5


def test_txn_latest_wins() -> None:
    state = TableState()
    assert state.txn_version("lakelog-p0") == 0
    assert state.txn_version("lakelog-p0", default=-1) == -1
    state.apply(0, [Txn("lakelog-p0", 5), Txn("lakelog-p1", 2)])
    state.apply(1, [Txn("lakelog-p0", 9)])
    assert state.txns == {"lakelog-p0": 9, "lakelog-p1": 2}
    # The latest txn action wins, even if its version is lower.
    state.apply(2, [Txn("lakelog-p1", 1), Txn("lakelog-p1", 4)])
    assert state.txn_version("lakelog-p1") == 4
    state.apply(3, [Txn("lakelog-p1", 3, last_updated=10)])
    assert state.txn_version("lakelog-p1") == 3
    assert state.txn_version("lakelog-p0") == 9


def test_metadata_and_protocol_latest_wins() -> None:
    state = TableState()
    m1 = Metadata("id", None, "{}", (), {"retention.ms": "1"})
    m2 = Metadata("id", None, "{}", (), {"retention.ms": "2"})
    state.apply(0, [Protocol(1, 2), m1])
    assert (state.protocol, state.metadata) == (Protocol(1, 2), m1)
    state.apply(1, [m2, Protocol(1, 3)])
    assert (state.protocol, state.metadata) == (Protocol(1, 3), m2)
    state.apply(2, [add("a")])
    assert (state.protocol, state.metadata) == (Protocol(1, 3), m2)


def test_version_ordering() -> None:
    state = TableState()
    # A fresh state accepts any first version (a checkpoint is folded in as one commit).
    state.apply(10, [add("a")])
    assert state.version == 10
    for wrong in (10, 9, 12, 0, -1):
        with pytest.raises(ValueError, match=f"commit {wrong}"):
            state.apply(wrong, [add("b"), Txn("t", 1)])
        # A refused commit changes nothing.
        assert (state.version, sorted(state.files), state.txns) == (10, ["a"], {})
    state.apply(11, [])
    assert state.version == 11


op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from("abcdef"), st.integers(0, 100)),
    st.tuples(st.just("remove"), st.sampled_from("abcdefg"), st.just(0)),
    st.tuples(st.just("txn"), st.sampled_from("xy"), st.integers(0, 100)),
)


@settings(max_examples=100)
@given(commits=st.lists(st.lists(op, max_size=6), max_size=8), first=st.integers(0, 5))
def test_replay_matches_a_dict_model(commits: list[list[tuple[str, str, int]]], first: int) -> None:
    state = TableState()
    files: dict[str, int] = {}
    txns: dict[str, int] = {}
    for n, commit in enumerate(commits):
        actions: list[Action] = []
        for kind, name, value in commit:
            if kind == "add":
                actions.append(add(name, size=value))
                files[name] = value
            elif kind == "remove":
                actions.append(RemoveFile(name, 0))
                files.pop(name, None)
            else:
                actions.append(Txn(name, value))
                txns[name] = value
        # Replaying what was written to (and read back from) the log is the same.
        state.apply(first + n, decode_commit(encode_commit(actions)))
    assert {path: a.size for path, a in state.files.items()} == files
    assert state.txns == txns
    assert state.version == (first + len(commits) - 1 if commits else -1)
