"""The chart's deploy gate: a pre-upgrade hook that refuses a state-losing topology change.

The chart is rendered by the real Helm engine and every object validated against the
Kubernetes schemas. The hook Job's own command (the image's entrypoint ``platform-streams``
with the Job's args) then runs as a process here, with the StreamsConfig file its ConfigMap
carries, against a real broker where the deployed application runs and keeps its state
(tests/support/deploy_gate.py): a candidate that renames the generated store's changelog
fails the hook naming the store, ``deployGate.allowIncompatible`` lets it through, and a
change downstream of the store passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.helm.chart_support import RELEASE, lint, manifests, one, render, validate
from tests.support.deploy_gate import Deployed, running_counts_app

pytestmark = [pytest.mark.helm, pytest.mark.broker, pytest.mark.apache_kafka]

GATE = f"{RELEASE}-platform-streams-deploy-gate"
CONFIG_PATH = "/etc/platform-streams/streams.yaml"


@pytest.fixture
def deployed(
    admin: KafkaAdmin, bootstrap_servers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Deployed]:
    with running_counts_app(admin, bootstrap_servers, tmp_path / "state", monkeypatch) as app:
        yield app


def _values(deployed: Deployed, factory: str, **gate: Any) -> dict[str, Any]:
    config = {
        "application_id": deployed.config.application_id,
        "bootstrap_servers": deployed.config.bootstrap_servers,
    }
    return {
        "app": {"factory": f"tests.integration.gate_apps:{factory}", "config": config},
        "deployGate": {"enabled": True, **gate},
    }


def _run_hook(values: dict[str, Any], deployed: Deployed, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    rendered = render(values)
    for doc in manifests(rendered):
        validate(doc)
    job = one(rendered, "Job", GATE)
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    [container] = job["spec"]["template"]["spec"]["containers"]
    config = tmp_path / "streams.yaml"  # the hook's ConfigMap, as the pod mounts it
    config.write_text(one(rendered, "ConfigMap", GATE)["data"]["streams.yaml"])
    args = [str(config) if a == CONFIG_PATH else a for a in container["args"]]
    assert CONFIG_PATH in container["args"] and "--against" in args
    env = {
        **os.environ,
        **deployed.env,
        **{e["name"]: e["value"] for e in container.get("env", []) if "value" in e},
    }
    # the image's entrypoint is platform-streams (Dockerfile)
    return subprocess.run(
        [sys.executable, "-m", "platform_streams.cli", *args],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_hook_refuses_a_renamed_changelog_naming_the_store_and_passes_a_compatible_change(
    deployed: Deployed, tmp_path: Path
) -> None:
    refused = _run_hook(_values(deployed, "counts_filtered"), deployed, tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr  # a failed hook fails the upgrade
    assert "REFUSED" in refused.stdout and deployed.store in refused.stdout
    assert deployed.changelog in refused.stdout and "Materialized.as_" in refused.stdout

    allowed = _run_hook(_values(deployed, "counts_filtered", allowIncompatible=True), deployed, tmp_path)
    assert allowed.returncode == 0 and "ALLOWED" in allowed.stdout, allowed.stdout + allowed.stderr

    compatible = _run_hook(_values(deployed, "counts_as_text"), deployed, tmp_path)
    assert compatible.returncode == 0 and "REFUSED" not in compatible.stdout, compatible.stdout


def test_the_gate_runs_before_the_rollout_guard_stops_the_pods_and_is_opt_in() -> None:
    gate = {"deployGate": {"enabled": True}}
    values = {"rollout": {"fingerprint": "f00d"}, "reset": {"enabled": True}, **gate}
    rendered = render(values)
    report = lint(values)
    assert not report["errors"] and not [m for m in report["messages"] if m["severity"] >= 2], report
    weights = {
        doc["metadata"]["name"]: int(doc["metadata"]["annotations"]["helm.sh/hook-weight"])
        for doc in manifests(rendered)
        if doc["kind"] == "Job"
        and "pre-upgrade" in doc["metadata"].get("annotations", {}).get("helm.sh/hook", "")
    }
    guard, reset = f"{RELEASE}-platform-streams-rollout-guard", f"{RELEASE}-platform-streams-reset"
    assert weights[GATE] < weights[guard] and weights[GATE] < weights[reset], weights
    # opt-in, as every hook of the chart (it needs the image to reach Kafka at each upgrade)
    assert not [d for d in manifests(render()) if d["metadata"]["name"] == GATE]
