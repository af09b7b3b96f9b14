"""The ``Storage`` contract, checked the same way on every backend.

Like fsspec's ``tests/abstract``: one set of tests parametrised over a local
directory, ``memory://`` and S3 on the moto server (HDFS needs a Hadoop client
and is not run here). The Delta commit protocol rests on ``put_if_absent``, so
its races get the most attention. Backend-specific checks (local temp files and
a cross-process race, ``open_storage``, ``S3Settings``) follow the contract.
"""

from __future__ import annotations

import contextlib
import errno
import io
import multiprocessing
import os
import pickle
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from lakelog.errors import InvalidConfigError, InvalidRequestError
from lakelog.storage import FileInfo, S3Settings, Storage, check_relative_path, open_storage
from lakelog.storage.fsspec_backend import MemoryStorage, S3Storage
from lakelog.storage.local import LocalStorage
from tests.fixtures.s3 import s3_client


def _payload(writer: int) -> bytes:
    """A payload unique to one writer (and of a different length for each)."""
    return f"writer-{writer}|".encode() * (writer + 1)


# --------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class Backend:
    """A fresh root of one backend, plus a view of what is stored *outside* it.

    Each root is a ``root`` child of a per-test container (directory, memory
    prefix or bucket), so ``outside()`` can prove that refused paths wrote nothing.
    """

    kind: str
    storage: Storage
    s3: S3Settings | None
    outside: Callable[[], list[str]]

    def reopen(self) -> Storage:
        """A second, independent client of the same root (another process, say)."""
        return open_storage(self.storage.url, self.s3)


@pytest.fixture(
    params=[
        pytest.param("local", id="local"),
        pytest.param("memory", id="memory"),
        pytest.param("s3", id="s3", marks=pytest.mark.s3),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind: str = request.param
    if kind == "local":
        root = tmp_path / "root"

        def outside_local() -> list[str]:
            return sorted(
                str(p.relative_to(tmp_path))
                for p in tmp_path.rglob("*")
                if p != root and root not in p.parents
            )

        yield Backend(kind, open_storage(str(root)), None, outside_local)
    elif kind == "memory":
        name = f"contract-{uuid.uuid4().hex}"
        container = f"/{name}"  # how MemoryFileSystem names it

        def outside_memory() -> list[str]:
            names: list[str] = [*MemoryFileSystem.store, *MemoryFileSystem.pseudo_dirs]
            return sorted(
                n
                for n in names
                if n.startswith(container + "/")
                and n != container + "/root"
                and not n.startswith(container + "/root/")
            )

        yield Backend(kind, open_storage(f"memory://{name}/root"), None, outside_memory)
        with contextlib.suppress(FileNotFoundError):
            MemoryFileSystem().rm(container, recursive=True)
    else:
        settings: S3Settings = request.getfixturevalue("s3_settings")
        bucket: str = request.getfixturevalue("make_bucket")()
        client = s3_client(settings)

        def outside_s3() -> list[str]:
            keys: list[str] = [
                obj["Key"]
                for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                for obj in page.get("Contents", [])
            ]
            return sorted(k for k in keys if not k.startswith("root/"))

        yield Backend(kind, open_storage(f"s3://{bucket}/root", settings), settings, outside_s3)


# --------------------------------------------------------------------------- read / put


def test_read_missing_raises_file_not_found(backend: Backend) -> None:
    storage = backend.storage
    for path in ("missing", "no/such/dir/object"):
        with pytest.raises(FileNotFoundError):
            storage.read_bytes(path)
        assert not storage.exists(path)


def test_directory_and_path_below_an_object_are_not_objects(backend: Backend) -> None:
    storage = backend.storage
    storage.put("d/obj", b"x")
    for path in ("d", "d/obj/child"):
        with pytest.raises(FileNotFoundError):
            storage.read_bytes(path)
        assert not storage.exists(path)
    assert storage.exists("d/obj")


@pytest.mark.parametrize("size", [0, 13, 1 << 20], ids=["empty", "small", "1MiB"])
def test_put_then_read_round_trip(backend: Backend, size: int) -> None:
    storage = backend.storage
    data = random.Random(size).randbytes(size)
    storage.put("a/b/object.bin", data)
    assert storage.read_bytes("a/b/object.bin") == data
    assert storage.exists("a/b/object.bin")
    assert storage.list_dir("a/b") == [FileInfo("a/b/object.bin", size)]


def test_read_many_answers_in_order_with_none_for_missing(backend: Backend) -> None:
    storage = backend.storage
    storage.put("m/1", b"one")
    storage.put("m/3", b"three")
    assert storage.read_many(["m/3", "m/2", "m/1", "m"]) == [b"three", None, b"one", None]
    assert storage.read_many([]) == []


def test_put_replaces(backend: Backend) -> None:
    storage = backend.storage
    storage.put("p/obj", b"a much longer first version")
    storage.put("p/obj", b"second")
    assert storage.read_bytes("p/obj") == b"second"
    assert storage.list_dir("p") == [FileInfo("p/obj", len(b"second"))]


# --------------------------------------------------------------------------- put_if_absent


def test_put_if_absent_creates_once(backend: Backend) -> None:
    storage = backend.storage
    assert storage.put_if_absent("_delta_log/00000.json", b"first") is True
    assert storage.read_bytes("_delta_log/00000.json") == b"first"
    assert storage.put_if_absent("_delta_log/00000.json", b"second") is False
    assert storage.read_bytes("_delta_log/00000.json") == b"first"
    # An object written by put() counts as existing too, and so does an empty one.
    storage.put("plain", b"")
    assert storage.put_if_absent("plain", b"not empty") is False
    assert storage.read_bytes("plain") == b""
    assert [i.path for i in storage.list_dir("_delta_log")] == ["_delta_log/00000.json"]


def test_put_if_absent_publishes_only_after_ready(backend: Backend) -> None:
    """``ready`` runs before the object is visible; if it raises, nothing is published."""
    storage = backend.storage
    seen: list[bool] = []

    def record_visibility() -> None:
        seen.append(storage.exists("_delta_log/a.json"))

    assert storage.put_if_absent("_delta_log/a.json", b"a", record_visibility) is True
    assert seen == [False] and storage.read_bytes("_delta_log/a.json") == b"a"

    def not_ready() -> None:
        raise OSError("segment flush failed")

    with pytest.raises(OSError, match="flush failed"):
        storage.put_if_absent("_delta_log/b.json", b"b", not_ready)
    assert not storage.exists("_delta_log/b.json")
    assert [i.path for i in storage.list_dir("_delta_log")] == ["_delta_log/a.json"]


def test_write_new_unsynced_then_sync_new(backend: Backend) -> None:
    """Deferred flush: the bytes are there at once and durable after ``sync_new``."""
    storage = backend.storage

    def write(sink: BinaryIO) -> None:
        sink.write(b"abc")

    size = storage.write_new("seg/p=0/a.parquet", write, sync=False)
    assert size == 3
    storage.sync_new(["seg/p=0/a.parquet"])
    assert storage.read_bytes("seg/p=0/a.parquet") == b"abc"


def test_put_if_absent_race_between_threads(backend: Backend) -> None:
    storage = backend.storage
    writers = 8
    for round_ in range(3):
        path = f"_delta_log/{round_:020d}.json"
        barrier = threading.Barrier(writers)

        def attempt(writer: int, path: str = path, barrier: threading.Barrier = barrier) -> bool:
            barrier.wait(timeout=30)
            return storage.put_if_absent(path, _payload(writer))

        with ThreadPoolExecutor(writers) as pool:
            results = list(pool.map(attempt, range(writers)))
        winners = [w for w, won in enumerate(results) if won]
        assert len(winners) == 1, results
        assert storage.read_bytes(path) == _payload(winners[0])
        assert backend.reopen().read_bytes(path) == _payload(winners[0])


# --------------------------------------------------------------------------- listing


def test_list_dir_immediate_children_sorted(backend: Backend) -> None:
    storage = backend.storage
    storage.put("d/b.bin", b"bb")
    storage.put("d/a.bin", b"aaaaa")
    storage.put("d/c", b"")
    storage.put("d/sub/x", b"xyz")
    storage.put("d/sub/deeper/y", b"y")
    storage.put("dx/not-a-child", b"1")
    storage.put("d.sibling", b"1")

    listing = storage.list_dir("d")
    assert listing == [
        FileInfo("d/a.bin", 5),
        FileInfo("d/b.bin", 2),
        FileInfo("d/c", 0),
        FileInfo("d/sub", 0, is_dir=True),
    ]
    assert listing == sorted(listing, key=lambda i: i.path)
    assert storage.list_dir("d/sub") == [
        FileInfo("d/sub/deeper", 0, is_dir=True),
        FileInfo("d/sub/x", 3),
    ]
    assert storage.list_dir("d/sub/deeper") == [FileInfo("d/sub/deeper/y", 1)]
    assert storage.list_dir("d/") == storage.list_dir("./d") == listing


def test_list_dir_of_missing_dir_or_object_is_empty(backend: Backend) -> None:
    storage = backend.storage
    assert storage.list_dir("missing") == []
    assert storage.list_dir("missing/deeper") == []
    storage.put("obj", b"1")
    assert storage.list_dir("obj") == []


def test_another_client_sees_changes(backend: Backend) -> None:
    """No client-side cache may hide what another client of the root did."""
    first, second = backend.storage, backend.reopen()
    first.put("d/one", b"1")
    assert [i.path for i in first.list_dir("d")] == ["d/one"]
    second.put("d/two", b"22")
    second.put("d/s/three", b"333")
    assert [i.path for i in first.list_dir("d")] == ["d/one", "d/s", "d/two"]
    assert first.read_bytes("d/two") == b"22"
    assert first.put_if_absent("d/two", b"x") is False
    first.delete_tree("d")
    assert second.list_dir("d") == []
    assert list(second.walk_files("d")) == []


def test_an_object_created_after_a_listing_is_read_without_listing_again(
    backend: Backend,
) -> None:
    """Listing a directory must not make later reads answer from that listing.

    A broker lists ``_meta/topics`` or a directory of blocks, then reads an
    object another broker created since: that object exists and must be read,
    not reported missing because the earlier listing did not show it.
    """
    first, second = backend.storage, backend.reopen()
    first.put("d/one", b"1")
    assert [i.path for i in first.list_dir("d")] == ["d/one"]
    assert second.put_if_absent("d/two", b"22")
    assert first.read_bytes("d/two") == b"22"
    assert first.read_many(["d/one", "d/two", "d/three"]) == [b"1", b"22", None]
    assert first.exists("d/two")
    assert first.put_if_absent("d/two", b"x") is False
    assert first.read_bytes("d/two") == b"22"


# --------------------------------------------------------------------------- delete / walk


def test_delete(backend: Backend) -> None:
    storage = backend.storage
    storage.put("d/x", b"1")
    storage.put("d/y", b"22")
    storage.delete("d/x")
    with pytest.raises(FileNotFoundError):
        storage.read_bytes("d/x")
    assert storage.list_dir("d") == [FileInfo("d/y", 2)]
    storage.delete("d/x")  # already gone
    storage.delete("never/existed")
    assert storage.put_if_absent("d/x", b"again") is True
    assert storage.read_bytes("d/x") == b"again"


def test_delete_tree(backend: Backend) -> None:
    storage = backend.storage
    storage.put("d/a", b"1")
    storage.put("d/s/b", b"2")
    storage.put("d/s/t/c", b"3")
    storage.put("dx/keep", b"4")
    storage.put("d.keep", b"5")

    storage.delete_tree("d/s")
    assert storage.list_dir("d") == [FileInfo("d/a", 1)]
    storage.delete_tree("d")
    assert storage.list_dir("d") == []
    assert list(storage.walk_files("d")) == []
    with pytest.raises(FileNotFoundError):
        storage.read_bytes("d/a")
    # Siblings sharing the name as a prefix are untouched.
    assert storage.read_bytes("dx/keep") == b"4"
    assert storage.read_bytes("d.keep") == b"5"
    storage.delete_tree("d")  # already gone
    storage.delete_tree("never/existed")


def test_walk_files(backend: Backend) -> None:
    storage = backend.storage
    files = {"w/a": b"1", "w/b/c": b"22", "w/b/d/e": b"333", "w/f/g": b""}
    for path, data in files.items():
        storage.put(path, data)
    storage.put("wx/outside", b"1")
    # Depth first over sorted listings: here that is the sorted order of the paths.
    assert list(storage.walk_files("w")) == [FileInfo(p, len(d)) for p, d in files.items()]
    assert list(storage.walk_files("w/b/d")) == [FileInfo("w/b/d/e", 3)]
    assert list(storage.walk_files("missing")) == []


# --------------------------------------------------------------------------- path safety

BAD_PATHS = ["", "/abs", "../x", "a/../../b", "a/..", "..", ".", "./", "a\\b", "a\x00b"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_check_relative_path_refuses(path: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_relative_path(path)


@pytest.mark.parametrize(
    ("path", "expected"),
    [("a", "a"), ("a/b/", "a/b"), ("./a//b/./c", "a/b/c"), ("a..b/..c/...", "a..b/..c/...")],
)
def test_check_relative_path_normalises(path: str, expected: str) -> None:
    assert check_relative_path(path) == expected


METHODS: dict[str, Callable[[Storage, str], object]] = {
    "read_bytes": lambda s, p: s.read_bytes(p),
    "put": lambda s, p: s.put(p, b"escaped"),
    "put_if_absent": lambda s, p: s.put_if_absent(p, b"escaped"),
    "delete": lambda s, p: s.delete(p),
    "delete_tree": lambda s, p: s.delete_tree(p),
    "list_dir": lambda s, p: s.list_dir(p),
    "exists": lambda s, p: s.exists(p),
    "walk_files": lambda s, p: list(s.walk_files(p)),
    "arrow_path": lambda s, p: s.arrow_path(p),
    "delta_uri": lambda s, p: s.delta_uri(p),
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_refuses_escaping_paths(backend: Backend, method: str) -> None:
    storage = backend.storage
    storage.put("inside", b"kept")
    for path in ("../escape", "a/../../escape", "/escape"):
        with pytest.raises(InvalidRequestError):
            METHODS[method](storage, path)
    assert backend.outside() == []
    assert storage.read_bytes("inside") == b"kept"


# --------------------------------------------------------------------------- pickling / arrow


def test_pickle_round_trip(backend: Backend) -> None:
    """Spark ships Storage objects to tasks; memory:// shares the process store."""
    storage = backend.storage
    storage.put("p/x", b"original")
    copy = pickle.loads(pickle.dumps(storage))
    assert type(copy) is type(storage)
    assert copy.url == storage.url
    assert copy.read_bytes("p/x") == b"original"
    copy.put("p/y", b"from the copy")
    assert storage.read_bytes("p/y") == b"from the copy"
    assert copy.put_if_absent("p/x", b"other") is False
    assert copy.delta_uri("topics/t") == storage.delta_uri("topics/t")
    assert copy.delta_storage_options() == storage.delta_storage_options()


def test_pyarrow_reads_parquet_written_with_put(backend: Backend) -> None:
    storage = backend.storage
    table = pa.table(
        {
            "offset": pa.array(range(1000), pa.int64()),
            "value": pa.array([f"value-{i}".encode() for i in range(1000)], pa.binary()),
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    storage.put("t/part-00000.parquet", buffer.getvalue())

    fs = storage.arrow_filesystem()
    path = storage.arrow_path("t/part-00000.parquet")
    assert fs.get_file_info(path).size == len(buffer.getvalue())
    assert pq.read_table(path, filesystem=fs).equals(table)
    assert pq.read_table(storage.arrow_path("t"), filesystem=fs).equals(table)


# --------------------------------------------------------------------------- local only


def test_local_list_dir_hides_temp_files_and_none_are_left(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    storage.put("d/a", b"1")
    assert storage.put_if_absent("d/a", b"2") is False
    assert storage.put_if_absent("d/b", b"3") is True
    assert sorted(os.listdir(tmp_path / "d")) == ["a", "b"]
    (tmp_path / "d" / ".tmp-left-by-a-crashed-writer").write_bytes(b"half")
    assert [i.path for i in storage.list_dir("d")] == ["d/a", "d/b"]
    assert [i.path for i in storage.walk_files("d")] == ["d/a", "d/b"]


def test_local_failed_writes_leave_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = LocalStorage(str(tmp_path))
    storage.put("d/a", b"old")
    storage.put("d/dir/inner", b"1")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", disk_full)
        with pytest.raises(OSError, match="No space"):
            storage.put("d/a", b"new")
        with pytest.raises(OSError, match="No space"):
            storage.put_if_absent("d/b", b"new")
    with pytest.raises(IsADirectoryError):
        storage.put("d/dir", b"cannot replace a directory")
    assert sorted(os.listdir(tmp_path / "d")) == ["a", "dir"]
    assert storage.read_bytes("d/a") == b"old"


def test_local_list_dir_skips_entry_deleted_while_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = LocalStorage(str(tmp_path))
    storage.put("d/a", b"1")
    storage.put("d/b", b"22")
    real_scandir = os.scandir
    target = str(tmp_path / "d")

    def scandir_then_delete(path: str) -> Iterator[os.DirEntry[str]]:
        entries = list(real_scandir(path))
        if path == target:
            os.unlink(os.path.join(target, "a"))  # retention, racing the listing
        return iter(entries)

    monkeypatch.setattr(os, "scandir", scandir_then_delete)
    assert storage.list_dir("d") == [FileInfo("d/b", 2)]


_PROCESSES = 4
_ROUNDS = 10


def _process_race_worker(storage: Storage, writer: int, barrier: Any, results: Any) -> None:
    """Runs in a spawned process; ``storage`` arrives pickled, as on a Spark task."""
    for round_ in range(_ROUNDS):
        barrier.wait(timeout=60)
        won = storage.put_if_absent(f"race/{round_:05d}.json", _payload(writer))
        results.put((round_, writer, won))


@pytest.mark.slow
def test_local_put_if_absent_race_across_processes(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path / "root"))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(_PROCESSES)
    results = ctx.Queue()
    processes = [
        ctx.Process(target=_process_race_worker, args=(storage, writer, barrier, results))
        for writer in range(_PROCESSES)
    ]
    for process in processes:
        process.start()
    try:
        outcomes: list[tuple[int, int, bool]] = [
            results.get(timeout=60) for _ in range(_PROCESSES * _ROUNDS)
        ]
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()
    assert [p.exitcode for p in processes] == [0] * _PROCESSES
    for round_ in range(_ROUNDS):
        winners = [w for r, w, won in outcomes if r == round_ and won]
        assert len(winners) == 1, outcomes
        assert storage.read_bytes(f"race/{round_:05d}.json") == _payload(winners[0])
    assert len(os.listdir(tmp_path / "root" / "race")) == _ROUNDS  # no temp files left


# --------------------------------------------------------------------------- open_storage


def test_open_storage_local_path_and_file_urls(tmp_path: Path) -> None:
    directory = str(tmp_path / "r")
    urls = [directory, f"file://{directory}", f"file:{directory}", f"file://localhost{directory}"]
    for url in urls:
        storage = open_storage(url)
        assert isinstance(storage, LocalStorage), url
        assert storage.directory == directory, url
        assert storage.url == f"file://{directory}"
    open_storage(directory).put("x", b"1")
    assert open_storage(f"file://{directory}").read_bytes("x") == b"1"


def test_open_storage_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    storage = open_storage("~/lake")
    assert isinstance(storage, LocalStorage)
    assert storage.directory == str(tmp_path / "lake")


@pytest.mark.s3
def test_open_storage_s3_and_s3a(s3_settings: S3Settings, make_bucket: Callable[[], str]) -> None:
    bucket = make_bucket()
    s3 = open_storage(f"s3://{bucket}/prefix", s3_settings)
    s3a = open_storage(f"s3a://{bucket}/prefix/", s3_settings)
    assert isinstance(s3, S3Storage)
    assert isinstance(s3a, S3Storage)
    assert s3a.url == s3.url == f"s3://{bucket}/prefix"
    s3a.put("x", b"via s3a")
    assert s3.read_bytes("x") == b"via s3a"
    assert s3.delta_uri("topics/t") == f"s3://{bucket}/prefix/topics/t"


def test_open_storage_memory() -> None:
    name = f"open-{uuid.uuid4().hex}"
    storage = open_storage(f"memory://{name}")
    assert isinstance(storage, MemoryStorage)
    try:
        storage.put("x", b"shared in the process")
        assert open_storage(f"memory://{name}/").read_bytes("x") == b"shared in the process"
        assert storage.delta_uri("topics/t") == f"memory://{name}/topics/t"
    finally:
        storage.delete("x")


@pytest.mark.parametrize(
    "url", ["", "ftp://host/dir", "gs://bucket/dir", "s3://", "file://remote-host/dir"]
)
def test_open_storage_refuses(url: str) -> None:
    with pytest.raises(InvalidConfigError):
        open_storage(url, S3Settings(endpoint_url="http://127.0.0.1:1"))


# --------------------------------------------------------------------------- S3 settings

_S3_VARIABLES = [
    *(f"{prefix}{name}" for prefix in ("", "LAKELOG_S3_", "AWS_") for name in (
        "ENDPOINT_URL", "ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "REGION", "SESSION_TOKEN"
    )),
    "AWS_DEFAULT_REGION",
]  # fmt: skip


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No S3 variable of the machine running the tests leaks into them."""
    for name in _S3_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _set_aws_env(env: pytest.MonkeyPatch) -> None:
    env.setenv("AWS_ENDPOINT_URL", "http://env-endpoint:9000")
    env.setenv("AWS_ACCESS_KEY_ID", "env-key")
    env.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    env.setenv("AWS_REGION", "eu-west-1")


def test_s3_settings_defaults(clean_env: pytest.MonkeyPatch) -> None:
    settings = S3Settings()
    assert settings.endpoint_url is None
    assert settings.access_key_id is None
    assert settings.region == "us-east-1"
    assert not settings.allow_http


def test_s3_settings_read_aws_environment(clean_env: pytest.MonkeyPatch) -> None:
    _set_aws_env(clean_env)
    settings = S3Settings()
    assert settings.endpoint_url == "http://env-endpoint:9000"
    assert settings.access_key_id == "env-key"
    assert settings.secret_access_key == "env-secret"
    assert settings.region == "eu-west-1"
    assert settings.allow_http
    assert "env-secret" not in repr(settings)


def test_s3_settings_explicit_arguments_win(clean_env: pytest.MonkeyPatch) -> None:
    _set_aws_env(clean_env)
    settings = S3Settings(
        endpoint_url="https://arg-endpoint",
        access_key_id="arg-key",
        secret_access_key="arg-secret",
        region="ap-south-1",
    )
    assert settings.endpoint_url == "https://arg-endpoint"
    assert settings.access_key_id == "arg-key"
    assert settings.secret_access_key == "arg-secret"
    assert settings.region == "ap-south-1"
    assert not settings.allow_http
    partial = S3Settings(region="ap-south-1")
    assert (partial.region, partial.access_key_id) == ("ap-south-1", "env-key")
    assert S3Settings(endpoint_url=None).endpoint_url is None


def test_s3_settings_precedence_between_variables(clean_env: pytest.MonkeyPatch) -> None:
    _set_aws_env(clean_env)
    clean_env.setenv("LAKELOG_S3_REGION", "lakelog-region")
    clean_env.setenv("AWS_DEFAULT_REGION", "default-region")
    # Bare field names are not variables lakelog reads (they used to override all).
    clean_env.setenv("REGION", "stray")
    clean_env.setenv("ENDPOINT_URL", "http://stray")
    settings = S3Settings()
    assert settings.region == "lakelog-region"
    assert settings.endpoint_url == "http://env-endpoint:9000"
    clean_env.delenv("LAKELOG_S3_REGION")
    assert S3Settings().region == "eu-west-1"
    clean_env.delenv("AWS_REGION")
    assert S3Settings().region == "default-region"


def test_s3_delta_storage_options(clean_env: pytest.MonkeyPatch) -> None:
    http = S3Storage(
        "s3://bucket-x/prefix",
        S3Settings(
            endpoint_url="http://127.0.0.1:9000",
            access_key_id="k",
            secret_access_key="s",
            region="eu-central-1",
        ),
    )
    assert http.delta_storage_options() == {
        "AWS_REGION": "eu-central-1",
        "conditional_put": "etag",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    https = S3Storage("s3://bucket-x", S3Settings(endpoint_url="https://minio.example"))
    options = https.delta_storage_options()
    assert options["conditional_put"] == "etag"
    assert options["AWS_ENDPOINT_URL"] == "https://minio.example"
    assert "AWS_ALLOW_HTTP" not in options
    assert "AWS_ACCESS_KEY_ID" not in options
    assert S3Storage("s3://bucket-x").delta_storage_options() == {
        "AWS_REGION": "us-east-1",
        "conditional_put": "etag",
    }
    assert http.delta_uri("topics/t") == "s3://bucket-x/prefix/topics/t"
