"""Confluent's registry rules on the pure state, and the service over a local root
with a toy format (in-process: the quick tier)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lakelog.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidSchemaVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectCompatibilityNotConfiguredError,
    SubjectModeNotConfiguredError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from lakelog.storage import open_storage
from server.schema_registry.compatibility import CompatibilityLevel
from server.schema_registry.registry import SchemaRegistry
from server.schema_registry.state import Mode, parse_mode, parse_version
from server.schema_registry.store import SchemaLog
from server.schema_registry.types import SchemaReference, SchemaType
from tests.server.schema_registry.toy_format import FORMAT, toy

AVRO = SchemaType.AVRO


def make(root: Path, **options: int) -> SchemaRegistry:
    return SchemaRegistry(open_storage(str(root)), formats=lambda _: FORMAT, **options)


@pytest.fixture
def reg(tmp_path: Path) -> SchemaRegistry:
    return make(tmp_path)


def code(exc: pytest.ExceptionInfo[SchemaRegistryError]) -> int:
    return exc.value.registry_code


def test_ids_are_global_and_versions_count_per_subject(reg: SchemaRegistry) -> None:
    a = reg.register("s-value", AVRO, toy(a=False))
    assert a == 1
    assert reg.register("s-value", AVRO, toy(a=False)) == a  # same schema: same answer
    assert reg.register("other-value", AVRO, toy(a=False)) == a  # same id in another subject
    b = reg.register("s-value", AVRO, toy(a=False, b=True))
    assert b == 2
    assert reg.versions("s-value") == [1, 2]
    assert reg.versions_with_id(a) == [("other-value", 1), ("s-value", 1)]
    assert reg.subjects() == ["other-value", "s-value"]
    assert reg.subjects(prefix="s-") == ["s-value"]
    latest = reg.subject_version("s-value", "latest")
    assert (latest.version, latest.schema_id, latest.deleted) == (2, b, False)
    assert reg.schema_by_id(b).native == {"a": False, "b": True}
    assert reg.lookup("s-value", AVRO, toy(a=False)).version == 1
    with pytest.raises(SchemaNotFoundError):
        reg.lookup("s-value", AVRO, toy(z=True))
    with pytest.raises(SubjectNotFoundError):
        reg.lookup("nope", AVRO, toy(a=False))
    with pytest.raises(SchemaNotFoundError) as caught:
        reg.schema_by_id(99)
    assert code(caught) == 40403


def test_canonical_identity_not_text(reg: SchemaRegistry) -> None:
    first = reg.register("s", AVRO, '{"fields": {"a": false, "b": true}}')
    assert reg.register("s", AVRO, '{ "fields" : {"b": true, "a": false} }') == first
    assert reg.schema_by_id(first).text == '{"fields": {"a": false, "b": true}}'


def test_compatibility_refused_under_backward_accepted_under_none(reg: SchemaRegistry) -> None:
    reg.register("s", AVRO, toy(a=False))
    with pytest.raises(IncompatibleSchemaError) as caught:
        reg.register("s", AVRO, toy(a=False, b=False))
    assert caught.value.http_status == 409 and code(caught) == 409
    assert "field b has no default" in caught.value.message
    assert reg.versions("s") == [1]
    reg.set_compatibility("s", CompatibilityLevel.NONE)
    assert reg.register("s", AVRO, toy(a=False, b=False)) == 2
    assert reg.check_compatibility("s", 1, AVRO, toy(q=False)) == []  # NONE
    reg.set_compatibility(None, CompatibilityLevel.FULL)
    assert reg.compatibility("s") is CompatibilityLevel.NONE
    assert reg.compatibility(None) is CompatibilityLevel.FULL
    assert reg.delete_compatibility("s") is CompatibilityLevel.NONE
    assert reg.compatibility("s") is CompatibilityLevel.FULL
    with pytest.raises(SubjectCompatibilityNotConfiguredError) as missing:
        reg.compatibility("s", default_to_global=False)
    assert code(missing) == 40408
    assert reg.check_compatibility("s", "latest", AVRO, toy(a=False, b=False, c=False)) != []
    assert reg.check_compatibility("s", 2, AVRO, toy(a=False, b=False, c=True)) == []


def test_invalid_and_too_large_schemas(tmp_path: Path) -> None:
    reg = make(tmp_path, max_schema_bytes=2048)
    with pytest.raises(InvalidSchemaError) as bad:
        reg.register("s", AVRO, "{not json")
    assert code(bad) == 42201
    big = toy(**{f"f{i:04d}": True for i in range(200)})
    with pytest.raises(InvalidSchemaError) as large:
        reg.register("s", AVRO, big)
    assert "more than the limit of 2048 bytes" in large.value.message
    assert reg.subjects() == []
    assert SchemaLog(reg.log.storage).read_after(0) == []


def test_soft_then_permanent_deletes(reg: SchemaRegistry) -> None:
    one = reg.register("s", AVRO, toy(a=False))
    reg.register("s", AVRO, toy(a=False, b=True))
    with pytest.raises(VersionNotSoftDeletedError) as caught:
        reg.delete_version("s", 1, permanent=True)
    assert code(caught) == 40407
    assert reg.delete_version("s", 1) == 1
    with pytest.raises(VersionSoftDeletedError) as again:
        reg.delete_version("s", 1)
    assert code(again) == 40406
    with pytest.raises(VersionNotFoundError) as gone:
        reg.subject_version("s", 1)
    assert code(gone) == 40402
    assert reg.subject_version("s", 1, deleted=True).deleted
    assert reg.versions("s") == [2] and reg.versions("s", deleted=True) == [1, 2]
    assert reg.schema_by_id(one)  # a soft-deleted schema still resolves (old records)
    with pytest.raises(SubjectNotSoftDeletedError) as first:
        reg.delete_subject("s", permanent=True)
    assert code(first) == 40405
    assert reg.delete_subject("s") == [2]
    with pytest.raises(SubjectSoftDeletedError) as soft:
        reg.delete_subject("s")
    assert code(soft) == 40404
    assert reg.subjects() == [] and reg.subjects(deleted=True) == ["s"]
    with pytest.raises(SubjectNotFoundError):
        reg.versions("s")
    assert reg.delete_subject("s", permanent=True) == [1, 2]
    with pytest.raises(SubjectNotFoundError) as none:
        reg.delete_subject("s")
    assert code(none) == 40401
    with pytest.raises(SchemaNotFoundError):
        reg.versions_with_id(one)
    # Re-registered after a permanent delete: its old id, never a new one; versions restart.
    assert reg.register("s", AVRO, toy(a=False)) == one
    assert reg.register("t", AVRO, toy(z=True)) == 3


def test_soft_deleted_schema_reregistered_gets_a_new_version_same_id(reg: SchemaRegistry) -> None:
    one = reg.register("s", AVRO, toy(a=False))
    reg.register("s", AVRO, toy(a=False, b=True))
    reg.delete_version("s", 1)
    assert reg.register("s", AVRO, toy(a=False)) == one
    assert reg.versions("s") == [2, 3]
    assert reg.subject_version("s", 3).schema_id == one


def test_references_and_referencedby(reg: SchemaRegistry) -> None:
    base = reg.register("base", AVRO, toy(x=False))
    ref = SchemaReference("base", "base", 1)
    uses = '{"fields": {"y": false}, "uses": ["base"]}'
    user = reg.register("user", AVRO, uses, [ref])
    assert user != base
    assert reg.referenced_by("base", 1) == [user]
    assert reg.schema_by_id(user).references == (ref,)
    latest_ref = SchemaReference("base", "base", -1)
    assert reg.lookup("user", AVRO, uses, [latest_ref]).schema_id == user
    with pytest.raises(InvalidSchemaError):
        reg.register("user2", AVRO, uses, [SchemaReference("base", "base", 7)])
    with pytest.raises(InvalidSchemaError):
        reg.register("user2", AVRO, uses)  # unresolved name
    with pytest.raises(ReferenceExistsError) as caught:
        reg.delete_version("base", 1)
    assert code(caught) == 42206
    with pytest.raises(ReferenceExistsError):
        reg.delete_subject("base")
    reg.delete_subject("user")
    assert reg.referenced_by("base", 1) == []
    assert reg.delete_subject("base") == [1]


def test_modes(reg: SchemaRegistry) -> None:
    reg.register("s", AVRO, toy(a=False))
    assert reg.mode() is Mode.READWRITE
    reg.set_mode("s", Mode.READONLY)
    with pytest.raises(OperationNotPermittedError) as caught:
        reg.register("s", AVRO, toy(a=False, b=True))
    assert code(caught) == 42205
    with pytest.raises(OperationNotPermittedError):
        reg.delete_subject("s")
    assert reg.register("s", AVRO, toy(a=False)) == 1  # reads still answer
    assert reg.delete_mode("s") is Mode.READONLY
    with pytest.raises(SubjectModeNotConfiguredError) as unset:
        reg.mode("s", default_to_global=False)
    assert code(unset) == 40409
    with pytest.raises(OperationNotPermittedError):
        reg.set_mode(None, Mode.IMPORT)  # subjects exist
    with pytest.raises(OperationNotPermittedError):
        reg.register("s", AVRO, toy(q=True), schema_id=50)  # ids only in IMPORT
    reg.set_mode("imported", Mode.IMPORT)
    assert reg.register("imported", AVRO, toy(q=True), schema_id=50, version=7) == 50
    assert reg.versions("imported") == [7]
    with pytest.raises(OperationNotPermittedError):
        reg.register("imported", AVRO, toy(r=True), schema_id=50)  # 50 is another schema
    # IMPORT skips the compatibility check; a later new schema gets an id past the imported.
    assert reg.register("imported", AVRO, toy(q=True, z=False), schema_id=51) == 51
    reg.set_mode("imported", Mode.READWRITE)
    assert reg.register("fresh", AVRO, toy(n=True)) == 52
    reg.set_mode(None, Mode.IMPORT, force=True)
    assert reg.mode("fresh") is Mode.IMPORT


def test_parsers() -> None:
    assert parse_version("latest") == "latest" and parse_version(-1) == "latest"
    assert parse_version("3") == 3
    for bad in ("0", "x", "2147483648", "-2"):
        with pytest.raises(InvalidSchemaVersionError) as caught:
            parse_version(bad)
        assert caught.value.registry_code == 42202
    assert parse_mode("import") is Mode.IMPORT
    with pytest.raises(SchemaRegistryError) as mode:
        parse_mode("SIDEWAYS")
    assert mode.value.registry_code == 42204


def test_two_registries_on_one_root_agree_on_ids(tmp_path: Path) -> None:
    """Concurrent writers through separate instances: each schema one id, none reused."""
    regs = [make(tmp_path), make(tmp_path)]
    results: dict[tuple[int, int], int] = {}
    errors: list[BaseException] = []

    def work(which: int) -> None:
        try:
            for i in range(12):
                # Every thread registers shared schemas 0..5 and its own 6..11.
                fields = {f"f{i}": True} if i < 6 else {f"own{which}_{i}": True}
                subject = f"s{i % 3}"
                results[(which, i)] = regs[which % 2].register(subject, AVRO, toy(**fields))
        except BaseException as exc:  # reported below
            errors.append(exc)

    reg0 = regs[0]
    reg0.set_compatibility(None, CompatibilityLevel.NONE)
    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    shared = {i: {results[(w, i)] for w in range(4)} for i in range(6)}
    assert all(len(ids) == 1 for ids in shared.values()), shared
    own = [results[(w, i)] for w in range(4) for i in range(6, 12)]
    all_ids = [next(iter(ids)) for ids in shared.values()] + own
    assert len(set(all_ids)) == len(all_ids) == 6 + 24
    for reg in regs:
        reg.refresh()
    assert regs[0].subjects() == regs[1].subjects()
    for subject in regs[0].subjects():
        assert regs[0].versions(subject) == regs[1].versions(subject)
