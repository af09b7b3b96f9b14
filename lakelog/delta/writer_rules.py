"""The rules a Delta table's metadata sets for its writers, checked on every lakelog commit.

lakelog accepts the writer features ``appendOnly``, ``invariants`` and
``checkConstraints`` (``state.SUPPORTED_WRITER_FEATURES``), as every table at
writer version 2 or 3 has them, so it keeps their rules itself:

* ``delta.appendOnly=true`` (a table property): no commit may remove data. A
  remove with ``dataChange=false`` only rearranges rows (merging segments) and
  is allowed, as Delta allows it; compaction, retention and record deletion
  remove data and are refused.
* CHECK constraints (``delta.constraints.<name>`` in the configuration) and
  column invariants (``delta.invariants`` in a field's metadata) are Spark SQL
  expressions, which lakelog cannot evaluate: a commit that adds new rows to
  such a table is refused, naming the constraint to drop. A commit that also
  removes files (compaction, merging, record deletion) only rewrites rows the
  table already holds, which met the constraint when it was added, and is allowed.
* ``delta.*`` properties belong to the table's owner, not to lakelog: a commit
  whose metadata would change or drop one is refused, so a topic config change
  never quietly undoes one of the rules above.

``check_commit`` is the one check; ``TableCommitter.commit`` runs it on every
attempt against the state that attempt builds on, so a rule set by another
writer a moment ago holds for the next commit.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from lakelog.delta.actions import Action, AddFile, Metadata, RemoveFile
from lakelog.delta.state import TableState
from lakelog.errors import DeltaTableRuleError

APPEND_ONLY = "delta.appendOnly"
CONSTRAINT_PREFIX = "delta.constraints."
INVARIANTS = "delta.invariants"
DELTA_PREFIX = "delta."


def append_only(metadata: Metadata) -> bool:
    return metadata.configuration.get(APPEND_ONLY, "false").strip().lower() == "true"


def constraints(metadata: Metadata) -> dict[str, str]:
    """CHECK constraint name -> its expression."""
    conf = metadata.configuration
    return {
        k[len(CONSTRAINT_PREFIX) :]: v for k, v in conf.items() if k.startswith(CONSTRAINT_PREFIX)
    }


def invariants(metadata: Metadata) -> dict[str, str]:
    """Column path (``a.b`` for nested fields) -> its invariant expression."""
    return dict(_schema_invariants(metadata.schema_string))


@functools.lru_cache(maxsize=64)
def _schema_invariants(schema_string: str) -> tuple[tuple[str, str], ...]:
    """Cached per schema: every append commit asks, and a schema rarely changes."""
    if INVARIANTS not in schema_string:
        return ()
    try:
        schema = json.loads(schema_string)
    except ValueError:
        return ()
    return tuple(_invariants_in(schema, ""))


def _invariants_in(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every field with ``delta.invariants`` metadata under a schema type, however nested."""
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "struct":
        for field in node.get("fields") or ():
            name = f"{path}.{field.get('name')}" if path else str(field.get("name"))
            raw = (field.get("metadata") or {}).get(INVARIANTS)
            if raw is not None:
                yield name, _expression(raw)
            yield from _invariants_in(field.get("type"), name)
    elif kind == "array":
        yield from _invariants_in(node.get("elementType"), f"{path}.element")
    elif kind == "map":
        yield from _invariants_in(node.get("keyType"), f"{path}.key")
        yield from _invariants_in(node.get("valueType"), f"{path}.value")


def _expression(raw: Any) -> str:
    """The SQL of an invariant, stored as ``{"expression": {"expression": "<sql>"}}`` JSON."""
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
        return str(parsed["expression"]["expression"])
    except (ValueError, TypeError, KeyError):
        return str(raw)


def check_data_removable(state: TableState, table: str, uri: str) -> None:
    """Raise ``DeltaTableRuleError`` if the table is append-only; also asked by a job before
    it does work whose commit would remove data, so the work is not done to be refused."""
    if state.metadata is not None and append_only(state.metadata):
        raise DeltaTableRuleError(
            f"topic {table!r} is append-only (table property {APPEND_ONLY}=true): lakelog "
            "does not remove its data, so compaction, retention and record deletion are "
            "refused; nothing was committed. Set it to false to allow them: ALTER TABLE "
            f"delta.`{uri}` SET TBLPROPERTIES ('{APPEND_ONLY}'='false')",
            table_property=APPEND_ONLY,
        )


def check_commit(state: TableState, actions: Sequence[Action], table: str, uri: str) -> None:
    """Raise ``DeltaTableRuleError`` if ``actions``, committed on ``state``, break a rule the
    table's metadata sets (see the module docstring); the message names the topic ``table``
    and gives the statement that lifts the rule on the Delta table at ``uri``."""
    metadata = state.metadata
    if metadata is None:  # the table's first commit: it sets the rules
        return
    removes = [a for a in actions if isinstance(a, RemoveFile)]
    if any(r.data_change for r in removes):
        check_data_removable(state, table, uri)
    new_rows = not removes and any(isinstance(a, AddFile) and a.data_change for a in actions)
    if new_rows:
        checks = constraints(metadata)
        if checks:
            name, expression = sorted(checks.items())[0]
            raise DeltaTableRuleError(
                f"topic {table!r} has the CHECK constraint {name!r} ({expression}), a SQL "
                "expression lakelog cannot evaluate, so it appends no records to it; "
                "nothing was committed. Drop the constraint to produce to this topic: "
                f"ALTER TABLE delta.`{uri}` DROP CONSTRAINT {name}",
                table_property=CONSTRAINT_PREFIX + name,
                constraints=sorted(checks),
            )
        columns = invariants(metadata)
        if columns:
            column, expression = sorted(columns.items())[0]
            raise DeltaTableRuleError(
                f"column {column!r} of topic {table!r} has the invariant ({expression}) in its "
                f"{INVARIANTS} metadata, a SQL expression lakelog cannot evaluate, so it "
                "appends no records to it; nothing was committed. Drop the invariant (write "
                "the column's schema without it) to produce to this topic",
                column=column,
            )
    for action in actions:
        if isinstance(action, Metadata):
            changed = _delta_properties_changed(metadata, action)
            if changed:
                raise DeltaTableRuleError(
                    f"this change to topic {table!r} would alter its Delta table properties "
                    f"{', '.join(changed)}, which lakelog never changes; nothing was "
                    "committed. Change them with Spark or delta-rs instead",
                    table_properties=changed,
                )


def _delta_properties_changed(before: Metadata, after: Metadata) -> list[str]:
    """The ``delta.*`` configuration keys whose values differ between two metadata actions."""
    old = {k: v for k, v in before.configuration.items() if k.startswith(DELTA_PREFIX)}
    new = {k: v for k, v in after.configuration.items() if k.startswith(DELTA_PREFIX)}
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
