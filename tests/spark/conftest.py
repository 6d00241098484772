"""The Spark suite's fixtures: ONE local SparkSession for the whole test session.

Starting Spark costs seconds (a JVM, then Python workers), so every test shares the
session; ``local[2]`` matches the two cores of CI. The suite is skipped where pyspark is
not installed (``pip install -e '.[spark]'``; it needs Java 17+).

Spark's Kafka connector is fetched with Maven before the session starts (a no-op once it is
in the cache; from ~/.m2 offline after the first download), so every test's session can
read through ``format("kafka")``; a second SparkContext with other jars is not possible in
one JVM. Where Maven is missing the session starts without it and the readers' comparison
test says why (it fails under CI=true, where .ci/run installs Maven).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.spark_connector import fetch_connector_once

pytest.importorskip("pyspark")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark tests get 600 s unless they say otherwise: the first one also pays for
    starting the JVM and the session (over two minutes on a loaded two-core machine)."""
    for item in items:
        if item.get_closest_marker("spark") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(600))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from platform_streams.ops.spark.session import spark_session

    fetch_connector_once()
    session = spark_session(
        "local[2]",
        "platform-streams-tests",
        {"spark.default.parallelism": "2", "spark.sql.shuffle.partitions": "2"},
        ui=False,
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
