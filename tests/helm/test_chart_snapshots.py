"""The chart's snapshot store settings reach the workers: the location in their config, the
S3 endpoint/region as the usual AWS variables, credentials from a Secret (envFrom)."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from tests.helm.chart_support import RELEASE, lint, one, render, streams_yaml, validate

FULLNAME = f"{RELEASE}-platform-streams"
SNAPSHOTS = {
    "location": "s3://state-snapshots/orders",
    "endpoint": "http://minio.storage:9000",
    "region": "eu-west-1",
    "existingSecret": "snapshot-store-credentials",
}


def _worker(rendered: dict[str, Any]) -> dict[str, Any]:
    pod = one(rendered, "StatefulSet", FULLNAME)["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "worker")


def test_snapshot_store_settings_reach_the_worker_config_and_environment() -> None:
    rendered = render({"snapshots": SNAPSHOTS, "extraEnvFrom": [{"configMapRef": {"name": "more"}}]})
    config = StreamsConfig.model_validate(streams_yaml(rendered))
    assert config.state_snapshot_location == SNAPSHOTS["location"]
    worker = _worker(rendered)
    env = {e["name"]: e.get("value") for e in worker["env"]}
    assert env["AWS_ENDPOINT_URL"] == SNAPSHOTS["endpoint"]
    assert env["AWS_REGION"] == SNAPSHOTS["region"]
    assert worker["envFrom"] == [
        {"secretRef": {"name": "snapshot-store-credentials"}},
        {"configMapRef": {"name": "more"}},
    ]
    validate(one(rendered, "StatefulSet", FULLNAME))
    report = lint({"snapshots": SNAPSHOTS})
    assert not report["errors"], report
    # without snapshot settings nothing is added
    rendered = render()
    worker = _worker(rendered)
    assert not {e["name"] for e in worker["env"]} & {"AWS_ENDPOINT_URL", "AWS_REGION"}
    assert "envFrom" not in worker
    assert "state_snapshot_location" not in streams_yaml(rendered)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"snapshots": {"location": "gs://bucket"}}, "snapshots.location"),
        ({"snapshots": {"endpoint": "minio:9000"}}, "snapshots.endpoint"),
        (
            {"snapshots": {"location": "s3://b/p"}, "app": {"config": {
                "application_id": "a", "bootstrap_servers": "k:9", "state_snapshot_location": "/x"}}},
            "both set",
        ),
    ],
)
def test_bad_snapshot_values_are_refused_naming_the_field(values: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        render(values)
