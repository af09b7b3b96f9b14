"""Typed columns in a topic's table: written at staging, in the Delta schema of that commit."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa
from deltalake import DeltaTable

from lakelog import Catalog, Record
from lakelog.delta.actions import Metadata
from lakelog.topic_config import TopicConfig
from lakelog.typed_columns import (
    VALUE_FIELDS,
    arrow_type,
    conform,
    delta_type,
    evolved_schema,
    merge_types,
    typed_fields,
)
from tests.fixtures.roots import RootSpec


class JsonFields:
    """A decoder for the tests: values are JSON objects of the fields in ``type_``."""

    def __init__(self, type_: pa.DataType) -> None:
        self.type = type_

    def __call__(
        self, topic: str, config: TopicConfig, rows: pa.Table, stored: Mapping[str, pa.DataType]
    ) -> dict[str, pa.Array]:
        values = [None if v is None else json.loads(v) for v in rows.column("value").to_pylist()]
        merged = merge_types(stored.get(VALUE_FIELDS), self.type)
        return {VALUE_FIELDS: conform(pa.array(values, self.type), merged)}


def _delta(catalog: Catalog, root: RootSpec, table_path: str) -> DeltaTable:
    storage = root.open()
    return DeltaTable(
        storage.delta_uri(table_path), storage_options=storage.delta_storage_options() or None
    )


V1 = pa.struct([("id", pa.int64()), ("name", pa.string())])
V2 = pa.struct([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


def test_typed_column_lands_with_the_schema_change_in_one_commit(
    catalog: Catalog, root: RootSpec
) -> None:
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    log.append([Record(b"untyped", partition=0)])
    log.appender.decoder = JsonFields(V1)
    version = log.append(
        [Record(json.dumps({"id": i, "name": f"n{i}"}).encode(), partition=i % 2) for i in range(4)]
        + [Record(None, key=b"k", partition=0)]
    ).version
    commit = log.committer._delta.read_commit(version)
    assert commit is not None
    assert any(isinstance(a, Metadata) for a in commit)
    assert typed_fields(log.metadata)[VALUE_FIELDS].type == V1
    # Kafka reads see the original bytes only.
    assert log.read(0, 0).records.column_names[-1] == "sequence"
    assert [r.value for r in log.read(1, 0).to_records("t")] == [
        b'{"id": 1, "name": "n1"}',
        b'{"id": 3, "name": "n3"}',
    ]
    # A commit that adds nothing new changes no metadata.
    again = log.append([Record(b'{"id": 9, "name": "x"}', partition=1)]).version
    assert not any(isinstance(a, Metadata) for a in log.committer._delta.read_commit(again) or [])

    table = _delta(catalog, root, log.table_path)
    rows = sorted(
        (r["partition"], r["offset"], r[VALUE_FIELDS]) for r in table.to_pyarrow_table().to_pylist()
    )
    assert rows == [
        (0, 0, None),
        (0, 1, {"id": 0, "name": "n0"}),
        (0, 2, {"id": 2, "name": "n2"}),
        (0, 3, None),
        (1, 0, {"id": 1, "name": "n1"}),
        (1, 1, {"id": 3, "name": "n3"}),
        (1, 2, {"id": 9, "name": "x"}),
    ]


def test_evolution_adds_nullable_fields_and_old_files_read_null(
    catalog: Catalog, root: RootSpec
) -> None:
    catalog.create_topic("t", 1)
    log = catalog.topic("t")
    log.appender.decoder = JsonFields(V1)
    log.append([Record(b'{"id": 1, "name": "a"}')])
    log.appender.decoder = JsonFields(V2)
    log.append([Record(b'{"id": 2, "name": "b", "amount": 2.5}')])
    assert typed_fields(log.metadata)[VALUE_FIELDS].type == V2
    reopened = Catalog(root.open()).topic("t")
    assert typed_fields(reopened.metadata)[VALUE_FIELDS].type == V2
    table = _delta(catalog, root, log.table_path)
    got = sorted((r["offset"], r[VALUE_FIELDS]) for r in table.to_pyarrow_table().to_pylist())
    assert got == [
        (0, {"id": 1, "name": "a", "amount": None}),
        (1, {"id": 2, "name": "b", "amount": 2.5}),
    ]


def test_delta_types_round_trip() -> None:
    types = [
        pa.bool_(),
        pa.int32(),
        pa.int64(),
        pa.float32(),
        pa.float64(),
        pa.string(),
        pa.binary(),
        pa.date32(),
        pa.timestamp("us", tz="UTC"),
        pa.decimal128(10, 2),
        pa.list_(pa.field("element", pa.int64())),
        pa.map_(pa.string(), pa.field("value", pa.float64())),
        pa.struct([("a", pa.struct([("b", pa.list_(pa.field("element", pa.string())))]))]),
    ]
    for t in types:
        assert arrow_type(json.loads(json.dumps(delta_type(t)))) == t


def test_merge_keeps_the_stored_order_and_type_and_appends_new_fields() -> None:
    old = pa.struct([("b", pa.int32()), ("a", pa.string())])
    new = pa.struct([("a", pa.string()), ("c", pa.bool_()), ("b", pa.int64())])
    assert merge_types(old, new) == pa.struct(
        [("b", pa.int32()), ("a", pa.string()), ("c", pa.bool_())]
    )
    fitted = conform(
        pa.array([{"a": "x", "c": True, "b": 2**40}, None], new), merge_types(old, new)
    )
    assert fitted.to_pylist() == [{"b": None, "a": "x", "c": True}, None]


def test_evolved_schema_is_none_when_nothing_is_new() -> None:
    meta = Metadata("id", "t", json.dumps({"type": "struct", "fields": []}), ("partition",), {})
    grown = evolved_schema(meta, [pa.field(VALUE_FIELDS, V1)])
    assert grown is not None
    assert (
        evolved_schema(Metadata("id", "t", grown, ("partition",), {}), [pa.field(VALUE_FIELDS, V1)])
        is None
    )


def test_a_field_two_writers_type_at_once_is_written_as_the_type_committed_first(
    catalog: Catalog, root: RootSpec
) -> None:
    catalog.create_topic("t", 1)
    first = catalog.topic("t")
    second = Catalog(root.open()).topic("t")
    first.appender.decoder = JsonFields(pa.struct([("amount", pa.float64())]))
    second.appender.decoder = JsonFields(pa.struct([("amount", pa.string())]))
    as_double = first.appender.stage([first.prepare([Record(b'{"amount": 1.5}')])])
    as_string = second.appender.stage(
        [second.prepare([Record(b'{"amount": "2.5"}'), Record(b'{"amount": "many"}')])]
    )
    first.appender.commit_staged(as_double)
    second.appender.commit_staged(as_string)
    assert typed_fields(second.metadata)[VALUE_FIELDS].type == pa.struct([("amount", pa.float64())])
    table = _delta(catalog, root, first.table_path).to_pyarrow_table()
    assert table.schema.field(VALUE_FIELDS).type == pa.struct([("amount", pa.float64())])
    got = sorted((r["offset"], r[VALUE_FIELDS]) for r in table.to_pylist())
    assert got == [(0, {"amount": 1.5}), (1, {"amount": 2.5}), (2, {"amount": None})]
