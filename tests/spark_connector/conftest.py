"""Fixtures of the connector tests: roots (local by default), the registered source, helpers.

Spark tests are slow to start and each action costs about a second, so the
roots here are local directories unless a test asks for S3 with
``@pytest.mark.parametrize("make_root", ["s3"], indirect=True)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import spark_connector
from tests.fixtures.roots import RootSpec


@pytest.fixture(params=["local"])
def make_root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RootSpec]]:
    """Fresh roots: local unless parametrised indirectly with "s3"."""
    counter = iter(range(1_000_000))

    def make() -> RootSpec:
        n = next(counter)
        if request.param == "local":
            return RootSpec(str(tmp_path / f"root{n}"))
        settings = request.getfixturevalue("s3_settings")
        bucket = request.getfixturevalue("make_bucket")()
        return RootSpec(f"s3://{bucket}/lakelog", settings)

    yield make


@pytest.fixture
def connector(spark: SparkSession) -> SparkSession:
    spark_connector.register(spark)
    return spark
