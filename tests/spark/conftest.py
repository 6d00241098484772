"""The Spark suite's fixtures: ONE local SparkSession for the whole test session.

Starting Spark costs seconds (a JVM, then Python workers), so every test shares the
session; ``local[2]`` matches the two cores of CI. The suite is skipped where pyspark is
not installed (``pip install -e '.[spark]'``; it needs Java 17+).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from platform_streams.ops.spark.session import spark_session

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
