"""Fixture plugins, split by area (each module is a set of factories)."""

pytest_plugins = [
    "tests.fixtures.s3",
    "tests.fixtures.roots",
    "tests.fixtures.brokers",
    "tests.fixtures.spark",
]
