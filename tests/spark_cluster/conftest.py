"""Session fixtures of the snapshot-store suite: a real S3 server and a Spark standalone cluster.

Both are started once per test session (versitygw: well under a second once built; the
cluster: a master and two worker JVMs, about a minute on two loaded cores) and only when a
test of this directory asks for them. They run in make test's Kafka-side process
(``kafka_side``), next to the other suites that need servers of their own.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams.dev.servers.s3 import S3Server, start_s3_server
from platform_streams.dev.servers.spark_cluster import SparkCluster, start_spark_cluster
from platform_streams.state.snapshots import SnapshotManifest
from tests.spark_cluster.compact_driver import RESULT
from tests.support.spark_connector import fetch_connector_once

pytest.importorskip("pyspark")
pytest.importorskip("obstore")

BUCKET = "snapshots"
ROOT = Path(__file__).resolve().parents[2]
DRIVER = "tests.spark_cluster.compact_driver"


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
    # The drivers put the fetched jars on spark.jars: Hadoop's s3a connector (the Parquet
    # copy of s3:// snapshots) comes with the Kafka connector.
    fetch_connector_once()
    started = time.monotonic()
    # The workers' executors find the object store through the same AWS settings.
    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark-cluster"), worker_env=s3_server.env())
    print(f"Spark standalone cluster {cluster.master_url} up in {time.monotonic() - started:.0f}s")
    try:
        yield cluster
    finally:
        cluster.stop()


class CompactionDriver:
    """A long-lived compaction driver on the cluster (tests/spark_cluster/compact_driver.py --serve)."""

    def __init__(self, cluster: SparkCluster, log: Path) -> None:
        self._log = open(log, "wb")  # noqa: SIM115 -- closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", DRIVER, cluster.master_url, "--serve"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,  # its JVM is in its group: one killpg ends the whole driver
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(RESULT):
                self._lines.put(line[len(RESULT) :])

    def submit(self, job: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()

    def result(self, timeout_s: float = 600) -> dict[str, Any]:
        started = time.monotonic()
        out: dict[str, Any] = json.loads(self._lines.get(timeout=timeout_s))
        print(f"compaction on the cluster: {time.monotonic() - started:.1f}s")
        assert "error" not in out, out.get("trace")
        return out

    def compact(self, job: dict[str, Any]) -> list[SnapshotManifest]:
        self.submit(job)
        return [SnapshotManifest.model_validate(m) for m in self.result()["manifests"]]

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            self.process.stdin.close()  # the driver stops its session and exits
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


@pytest.fixture(scope="session")
def compaction_driver(
    spark_cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CompactionDriver]:
    driver = CompactionDriver(spark_cluster, tmp_path_factory.mktemp("driver") / "driver.log")
    try:
        yield driver
    finally:
        driver.stop()
