"""The SparkSession factory of the Spark jobs: local mode by default, any master by config.

Two settings matter beyond the master:

* the Python that executors run must be *this* interpreter (the project's virtualenv, with
  confluent-kafka and rocksdict), not whatever ``python3`` is on the PATH;
* executors must import what the driver imports (``platform_streams`` and the user's
  topology module), so the driver's ``sys.path`` is handed on as ``PYTHONPATH``. On a real
  cluster, ship the code instead (``spark.submit.pyFiles``, an image, a conda pack).

Spark's Kafka connector (and with it Hadoop's s3a connector, for Spark's writers on
``s3://`` snapshot locations) goes on ``spark.jars`` when it has been fetched
(:mod:`.connector`) and the caller's ``conf`` does not supply jars or packages itself; a
cluster deployment supplies it its own way (docs/spark.md).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

__all__ = ["MASTER_ENV", "spark_job_session", "spark_session"]

log = logging.getLogger(__name__)

#: Environment variable naming the Spark master when none is given.
MASTER_ENV = "PLATFORM_STREAMS_SPARK_MASTER"
_DEFAULT_MASTER = "local[*]"


def _python_path() -> str:
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for entry in sys.path:
        path = os.path.abspath(entry or os.getcwd())
        if os.path.isdir(path) and path not in entries:
            entries.append(path)
    return os.pathsep.join(entries)


def spark_session(
    master: str | None = None,
    app_name: str = "platform-streams",
    conf: Mapping[str, str] | None = None,
    *,
    ui: bool = True,
) -> SparkSession:
    """Get or create the SparkSession: ``master`` or ``$PLATFORM_STREAMS_SPARK_MASTER`` or local[*].

    ``conf`` entries are applied last; without ``spark.jars``/``spark.jars.packages`` in it,
    the fetched Kafka connector jars (if any) are added. ``ui=False`` turns off the web UI and console
    progress bars (tests); otherwise every job shows its stages there with a description.
    """
    chosen = master or os.environ.get(MASTER_ENV) or _DEFAULT_MASTER
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(chosen)
        .appName(app_name)
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", _python_path())
        .config("spark.sql.session.timeZone", "UTC")
    )
    if not ui:
        builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    from platform_streams.ops.spark.connector import connector_jars  # lazy: the module is also a CLI

    given = dict(conf or {})
    jars = connector_jars()
    if jars and not given.keys() & {"spark.jars", "spark.jars.packages"}:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in given.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    log.info("Spark %s session on %s (%s)", session.version, chosen, app_name)
    return session


@contextmanager
def spark_job_session(
    master: str | None = None, app_name: str = "platform-streams"
) -> Iterator[SparkSession]:
    """A session for one job (the CLI): stopped afterwards unless it was already running."""
    existing = SparkSession.getActiveSession()
    session = existing if existing is not None else spark_session(master, app_name)
    try:
        yield session
    finally:
        if existing is None:
            session.stop()
