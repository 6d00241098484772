"""Session fixtures of the snapshot-store suite: a real S3 server and a Spark standalone cluster.

Both are started once per test session (versitygw: well under a second once built; the
cluster: a master and two worker JVMs, about a minute on two loaded cores) and only when a
test of this directory asks for them. They run in make test's Kafka-side process
(``kafka_side``), next to the other suites that need servers of their own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.support.s3_server import S3Server, start_s3_server
from tests.support.spark_cluster import SparkCluster, start_spark_cluster

pytest.importorskip("pyspark")
pytest.importorskip("obstore")

BUCKET = "snapshots"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    work = tmp_path_factory.mktemp("s3")
    try:
        server = start_s3_server(work / "root", work / "versitygw.log")
    except RuntimeError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no S3 server: {exc}")
    server.create_bucket(BUCKET)
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())  # the usual AWS settings, as a worker pod would have them
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()


@pytest.fixture(scope="session")
def spark_cluster(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    started = time.monotonic()
    # The workers' executors find the object store through the same AWS settings.
    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark-cluster"), worker_env=s3_server.env())
    print(f"Spark standalone cluster {cluster.master_url} up in {time.monotonic() - started:.0f}s")
    try:
        yield cluster
    finally:
        cluster.stop()
