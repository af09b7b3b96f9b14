"""Fixture plugins, split by area (each module is a set of factories)."""

import os

# Brokers of the tests open a Kafka listener only where a test gives it a port
# (``start_broker`` gives each subprocess broker a free one): a default of 9092
# would make every second broker, and any Kafka on the machine, collide.
os.environ.setdefault("LAKELOG_KAFKA_LISTENERS", "")

pytest_plugins = [
    "tests.fixtures.tiers",
    "tests.fixtures.s3",
    "tests.fixtures.roots",
    "tests.fixtures.brokers",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
]
