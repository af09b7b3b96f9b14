"""The test S3 server keeps S3's promise that one conditional PUT of a key wins."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError

from lakelog.storage import S3Settings
from lakelog.testing.atomic_moto import WRITE_HANDLERS, make_writes_atomic
from tests.fixtures.s3 import s3_client

RACERS = 12
KEYS = 100


def _race_for(clients: list[Any], bucket: str, key: str) -> list[int]:
    """HTTP statuses of one ``If-None-Match: *`` PUT of ``key`` per client, sent at once."""
    start = threading.Barrier(len(clients))

    def put(client: Any) -> int:
        start.wait()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"x" * 64, IfNoneMatch="*")
        except ClientError as exc:
            return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
        return 200

    with ThreadPoolExecutor(len(clients)) as pool:  # map re-raises a thread's exception
        return list(pool.map(put, clients))


@pytest.mark.s3
def test_racing_conditional_puts_of_one_key_have_exactly_one_winner(
    s3_settings: S3Settings, make_bucket: Callable[[], str]
) -> None:
    bucket = make_bucket()
    clients = [s3_client(s3_settings) for _ in range(RACERS)]
    doubled = []
    for n in range(KEYS):
        statuses = _race_for(clients, bucket, f"race/{n}")
        assert sorted(set(statuses)) in ([200, 412], [200]), statuses
        if statuses.count(200) != 1:
            doubled.append((n, statuses.count(200)))
    assert doubled == [], f"keys whose conditional PUT more than one client won: {doubled}"


def test_every_write_handler_moto_runs_is_found_and_wrapped() -> None:
    """A moto that renamed its write handlers fails here, not as a rare double commit."""
    from moto.s3.responses import S3Response

    originals = {name: getattr(S3Response, name) for name in WRITE_HANDLERS}
    try:
        make_writes_atomic()
        for name, original in originals.items():
            wrapped = getattr(S3Response, name)
            assert wrapped is not original
            assert wrapped.__wrapped__ is original
    finally:
        for name, original in originals.items():
            setattr(S3Response, name, original)
