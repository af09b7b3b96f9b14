"""The rules a Delta table's metadata sets for lakelog's commits (pure: states and actions)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from lakelog.delta.actions import Action, AddFile, Metadata, Protocol, RemoveFile, Txn
from lakelog.delta.state import TableState
from lakelog.delta.writer_rules import check_commit, constraints, invariants
from lakelog.errors import DeltaTableRuleError, PolicyViolationError
from lakelog.records import DELTA_SCHEMA_STRING

URI = "/data/lakelog/topics/t/id"
BASE = Metadata("id", "t", DELTA_SCHEMA_STRING, ("partition",), {"lakelog.partitions": "1"})


def state(**configuration: str) -> TableState:
    """A table whose configuration adds ``configuration`` (``__`` for ``.``) to lakelog's own."""
    table = TableState()
    conf = {**BASE.configuration, **{k.replace("__", "."): v for k, v in configuration.items()}}
    table.apply(0, [Protocol(1, 3), replace(BASE, configuration=conf)])
    return table


def add(path: str = "p0.parquet", data_change: bool = True) -> AddFile:
    return AddFile(path, {"partition": "0"}, 10, 0, data_change)


def remove(path: str = "old.parquet", data_change: bool = True) -> RemoveFile:
    return RemoveFile(path, 0, data_change, {"partition": "0"}, 10)


APPEND: list[Action] = [Txn("lakelog.partition.0", 5), add()]
COMPACTION: list[Action] = [remove(), add("new.parquet")]
RETENTION: list[Action] = [remove("a.parquet"), remove("b.parquet")]
MERGE: list[Action] = [remove(data_change=False), add("merged.parquet", data_change=False)]


def refused(table: TableState, actions: list[Action]) -> DeltaTableRuleError:
    with pytest.raises(DeltaTableRuleError) as caught:
        check_commit(table, actions, "t", URI)
    assert isinstance(caught.value, PolicyViolationError) and caught.value.code == 44
    assert "nothing was committed" in caught.value.message
    return caught.value


@pytest.mark.parametrize("actions", [COMPACTION, RETENTION], ids=["compaction", "retention"])
def test_an_append_only_table_refuses_removing_data(actions: list[Action]) -> None:
    error = refused(state(delta__appendOnly="true"), actions)
    assert "append-only (table property delta.appendOnly=true)" in error.message
    assert f"ALTER TABLE delta.`{URI}` SET TBLPROPERTIES ('delta.appendOnly'='false')" in (
        error.message
    )
    assert error.details["table_property"] == "delta.appendOnly"


def test_an_append_only_table_takes_appends_and_rearrangements() -> None:
    table = state(delta__appendOnly="TRUE")  # Delta's booleans are case-insensitive
    check_commit(table, APPEND, "t", URI)
    check_commit(table, MERGE, "t", URI)  # dataChange=false: the same rows, other files
    for off in (state(delta__appendOnly="false"), state()):
        check_commit(off, COMPACTION, "t", URI)
        check_commit(off, RETENTION, "t", URI)


def test_a_check_constraint_refuses_appends_naming_it() -> None:
    table = state(**{"delta__constraints__positive": "offset >= 0"})
    assert constraints(table.metadata or BASE) == {"positive": "offset >= 0"}
    error = refused(table, APPEND)
    assert "CHECK constraint 'positive' (offset >= 0)" in error.message
    assert f"ALTER TABLE delta.`{URI}` DROP CONSTRAINT positive" in error.message
    assert error.details["table_property"] == "delta.constraints.positive"
    # Rewrites carry rows the table already holds; commits without rows add none.
    for actions in (COMPACTION, RETENTION, MERGE, [Txn("spark-query.q", 3)]):
        check_commit(table, actions, "t", URI)


def schema_with_invariant(expression: str) -> str:
    """lakelog's schema with a ``delta.invariants`` on a field nested in ``headers``."""
    schema: dict[str, Any] = json.loads(DELTA_SCHEMA_STRING)
    headers = next(f for f in schema["fields"] if f["name"] == "headers")
    element = headers["type"]["elementType"]
    key = next(f for f in element["fields"] if f["name"] == "key")
    key["metadata"] = {"delta.invariants": json.dumps({"expression": {"expression": expression}})}
    return json.dumps(schema)


def test_a_column_invariant_refuses_appends_naming_the_column() -> None:
    table = state()
    assert table.metadata is not None
    table.metadata = replace(table.metadata, schema_string=schema_with_invariant("key != ''"))
    assert invariants(table.metadata) == {"headers.element.key": "key != ''"}
    error = refused(table, APPEND)
    assert "column 'headers.element.key' of topic 't' has the invariant (key != '')" in (
        error.message
    )
    check_commit(table, COMPACTION, "t", URI)
    assert invariants(BASE) == {}


def test_lakelog_never_changes_delta_properties() -> None:
    """A topic config change that would drop a user's ``delta.*`` property is refused; one
    that keeps them passes."""
    table = state(delta__appendOnly="true", delta__constraints__c="offset >= 0")
    assert table.metadata is not None
    dropped = replace(table.metadata, configuration={"lakelog.partitions": "1"})
    error = refused(table, [dropped])
    assert "delta.appendOnly, delta.constraints.c" in error.message
    kept = {**table.metadata.configuration, "lakelog.config.retention.ms": "1000"}
    check_commit(table, [replace(table.metadata, configuration=kept)], "t", URI)


def test_the_first_commit_sets_the_rules() -> None:
    conf = {"delta.appendOnly": "true", "delta.constraints.c": "offset >= 0"}
    check_commit(TableState(), [Protocol(1, 3), replace(BASE, configuration=conf)], "t", URI)
