"""Fixtures of the Dagster suite: fresh example-app specs and resources on the test broker.

Every test gets its own topics and application id (the example plugin takes topic names in
its config) and its own deployment root under ``tmp_path``; worker processes a test starts
are stopped when it ends, whatever happened.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dagster")

from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource
from platform_streams.kafka import KafkaAdmin
from tests.dagster.support import PARTITIONS
from tests.support.kafka import new_topic
from tests.support.spark_connector import fetch_connector_once


@pytest.fixture
def orders_topics(admin: KafkaAdmin) -> dict[str, str]:
    return {
        "orders_topic": new_topic(admin, PARTITIONS, "orders"),
        "big_orders_topic": new_topic(admin, PARTITIONS, "big"),
        "by_customer_topic": new_topic(admin, PARTITIONS, "bycust"),
        "counts_topic": new_topic(admin, PARTITIONS, "counts"),
        "dlq": new_topic(admin, 1, "dlq"),
    }


@pytest.fixture
def app_id() -> str:
    return f"dagster-app-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def resources(bootstrap_servers: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    deployment = StreamsDeploymentResource(
        root_dir=str(tmp_path / "deploy"), start_timeout_s=60, stop_timeout_s=30
    )
    made = {
        "kafka": KafkaResource(bootstrap_servers=bootstrap_servers),
        "streams_deployment": deployment,
        "spark": SparkResource(master="local[1]", conf={"spark.default.parallelism": "1"}),
    }
    yield made
    launcher = deployment.launcher()
    root = deployment.deploy_root
    if root.exists():
        for app_dir in root.iterdir():
            if (app_dir / "deployment.json").exists():
                launcher.stop(app_dir.name)


@pytest.fixture
def spark_job_session() -> Iterator[None]:
    """For tests running a Spark job in process: the SparkSession the job's SparkResource
    starts is stopped afterwards, unless one was active before (the Spark suite's). The
    Kafka connector is fetched first: the first session fixes the JVM's jars for the whole
    process (tests/support/spark_connector.py)."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    fetch_connector_once()

    had_session = SparkSession.getActiveSession() is not None
    yield
    active = SparkSession.getActiveSession()
    if active is not None and not had_session:
        active.stop()
