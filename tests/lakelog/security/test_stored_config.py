"""ACLs and quotas in the storage root (local and S3): versioned, put-if-absent, no lost updates."""

from __future__ import annotations

import threading

import pytest

from lakelog.errors import CorruptRecordError
from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from lakelog.security.quota import QuotaEntity, QuotaKind
from lakelog.security.store import VersionedDocument
from lakelog.security.stored_config import ACLS_DIR, AclStore, QuotaStore
from tests.fixtures.roots import RootSpec


def read_acl(principal: str, topic: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
        principal,
        Operation.READ,
        Permission.ALLOW,
    )


def test_concurrent_adds_are_never_lost(root: RootSpec) -> None:
    """Eight writers add ACLs at once; every one of them is in the final snapshot."""
    storage = root.open()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        store = AclStore(root.open())
        try:
            for i in range(3):
                store.add([read_acl(f"User:w{n}", f"t{i}")])
        except BaseException as exc:  # reported below: a thread must not swallow it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    loaded = AclStore(storage).load()
    assert loaded is not None
    version, acls = loaded
    assert acls == {read_acl(f"User:w{n}", f"t{i}") for n in range(8) for i in range(3)}
    assert version == 24  # one version per change, none overwritten
    assert len(VersionedDocument(storage, ACLS_DIR).versions()) <= 20  # old ones pruned


def test_remove_by_filter_and_load_newer_than(root: RootSpec) -> None:
    store = AclStore(root.open())
    assert store.load() is None
    added = store.add([read_acl("User:a", "x"), read_acl("User:b", "x"), read_acl("User:a", "y")])
    assert len(added) == 3
    assert store.add([read_acl("User:a", "x")]) == []  # already there
    removed = store.remove([AclFilter(principal="User:a")])
    assert removed == sorted([read_acl("User:a", "x"), read_acl("User:a", "y")])
    loaded = store.load()
    assert loaded is not None and loaded[1] == {read_acl("User:b", "x")}
    assert store.load(newer_than=loaded[0]) is None


def test_quota_overrides_alter_set_and_delete(root: RootSpec) -> None:
    store = QuotaStore(root.open())
    alice = QuotaEntity("alice", None)
    assert store.alter(alice, {QuotaKind.PRODUCE: 10.0, QuotaKind.FETCH: 20.0}) == {
        QuotaKind.PRODUCE: 10.0,
        QuotaKind.FETCH: 20.0,
    }
    assert store.alter(alice, {}, [QuotaKind.FETCH]) == {QuotaKind.PRODUCE: 10.0}
    loaded = store.load()
    assert loaded is not None and loaded[1] == {alice: {QuotaKind.PRODUCE: 10.0}}


def test_quota_changes_of_several_entities_are_one_version(root: RootSpec) -> None:
    store = QuotaStore(root.open())
    alice, app = QuotaEntity("alice", None), QuotaEntity(None, "app")
    store.alter(alice, {QuotaKind.PRODUCE: 10.0})
    first = store.load()
    assert first is not None
    after = store.alter_many(
        [(alice, {QuotaKind.FETCH: 5.0}, [QuotaKind.PRODUCE]), (app, {QuotaKind.REQUEST: 3.0}, [])]
    )
    assert after == {alice: {QuotaKind.FETCH: 5.0}, app: {QuotaKind.REQUEST: 3.0}}
    loaded = store.load()
    assert loaded is not None and loaded[0] == first[0] + 1
    assert loaded[1] == after


def test_a_corrupt_snapshot_is_named(root: RootSpec) -> None:
    storage = root.open()
    document = VersionedDocument(storage, ACLS_DIR)
    storage.put(f"{ACLS_DIR}/{1:020d}.json", b"{not json")
    with pytest.raises(CorruptRecordError, match=f"{ACLS_DIR}/00000000000000000001.json"):
        document.latest()
