"""Spark's Kafka connector, fetched before the first SparkSession of a test process starts.

PySpark launches its JVM once per process, with the ``spark.jars`` of the first session;
a later session cannot add the connector to the driver's classpath. So whichever suite
starts Spark first (tests/dagster's in-process Spark jobs run before tests/spark) must
fetch the connector first, or on a machine without it cached (every fresh CI machine) the
Spark suite's ``format("kafka")`` comparisons find no kafka source.
"""

from __future__ import annotations

#: why the connector could not be fetched (empty when it was, or not tried yet)
CONNECTOR_PROBLEM: list[str] = []
_fetched: list[bool] = []


def fetch_connector_once() -> None:
    """Fetch the connector with Maven (a no-op once cached); remember a failure's reason."""
    if _fetched:
        return
    _fetched.append(True)
    from platform_streams.ops.spark.connector import fetch_connector

    try:
        fetch_connector()
    except RuntimeError as exc:
        CONNECTOR_PROBLEM.append(str(exc))
