"""The Kubernetes deploy target's rollouts, endpoints and KEDA deferral.

The launcher's values are rendered by the real chart (Helm v4 engine) and the names it
derives (pods, headless-Service endpoints, the StatefulSet and ScaledObject it scales or
pauses) are checked against what the chart rendered. There is no cluster here: the
``kubectl``/``helm`` commands are recorded by a runner and their order is asserted (a
changed fingerprint must stop every pod before the upgrade; an unchanged one rolls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dagster_defs.deploy.kubernetes import KEDA_PAUSED_ANNOTATION, HelmLauncher
from dagster_defs.spec import resolve_app
from tests.helm.chart_support import one, render

pytestmark = [pytest.mark.dagster, pytest.mark.helm]

SPEC = {"name": "shop", "app": "orders", "streams": {"application_id": "shop-app"}}
KEDA = {
    "autoscaling": {
        "keda": {"enabled": True, "topics": ["orders"], "partitions": 4, "minReplicas": 1, "maxReplicas": 4}
    }
}


def _launcher(tmp_path: Path, calls: list[list[str]], **kwargs: Any) -> HelmLauncher:
    def runner(command: Any) -> str:
        calls.append(list(command))
        return ""

    return HelmLauncher(tmp_path, namespace="streams", runner=runner, **kwargs)


def _verbs(calls: list[list[str]]) -> list[str]:
    return [" ".join(c[:3]) for c in calls]


def test_pod_endpoints_are_the_headless_service_names_the_chart_renders(tmp_path: Path) -> None:
    launcher = _launcher(tmp_path, [], http_port=9000)
    request = resolve_app(SPEC).deployment_request({"bootstrap_servers": "kafka:9092"}, {}, workers=2)
    result = launcher.ensure(request)
    values = yaml.safe_load((tmp_path / "shop" / "values.yaml").read_text())
    rendered = render(values, name="shop", namespace="streams")
    statefulset = one(rendered, "StatefulSet")
    assert statefulset["metadata"]["name"] == "shop" and statefulset["spec"]["replicas"] == 2
    headless = statefulset["spec"]["serviceName"]
    assert one(rendered, "Service", headless)["spec"]["clusterIP"] == "None"
    assert [w.endpoint for w in result.record.workers] == [
        f"http://shop-{i}.{headless}.streams.svc.cluster.local:9000" for i in range(2)
    ]
    # the pod's advertised application_server is the same name (query routing)
    env = {e["name"]: e.get("value") for e in statefulset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (
        env["PLATFORM_STREAMS_APPLICATION_SERVER"]
        == f"$(POD_NAME).{headless}.$(POD_NAMESPACE).svc.cluster.local:9000"
    )


def test_a_changed_fingerprint_stops_every_pod_before_the_upgrade(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    launcher = _launcher(tmp_path, calls)
    app = resolve_app(SPEC)
    first = app.deployment_request({"bootstrap_servers": "kafka:9092"}, {}, workers=3)
    assert launcher.ensure(first).action == "started"
    # same topology, more workers: a rolling upgrade, nothing stopped
    scaled = launcher.scale(first, 4)
    assert scaled.action == "scaled" and "rolling" in scaled.reason
    assert _verbs(calls) == ["helm upgrade --install", "helm upgrade --install"]
    calls.clear()
    changed = resolve_app({**SPEC, "app_config": {"big_order_amount": 5000}})
    second = changed.deployment_request({"bootstrap_servers": "kafka:9092"}, {}, workers=3)
    assert second.fingerprint != first.fingerprint
    result = launcher.ensure(second)
    assert result.action == "rolled" and "stopped every pod" in result.reason
    assert _verbs(calls) == [
        "kubectl scale statefulset",
        "kubectl wait --for=delete",
        "helm upgrade --install",
    ]
    assert calls[0][3:5] == ["shop", "--replicas=0"]
    assert "app.kubernetes.io/instance=shop" in calls[1]


def test_under_keda_scale_defers_and_a_rollout_pauses_the_scaled_object(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    launcher = _launcher(tmp_path, calls, extra_values=KEDA)
    app = resolve_app(SPEC)
    request = app.deployment_request({"bootstrap_servers": "kafka:9092"}, {}, workers=2)
    launcher.ensure(request)
    values = yaml.safe_load((tmp_path / "shop" / "values.yaml").read_text())
    rendered = render(values, name="shop", namespace="streams")
    assert "replicas" not in one(rendered, "StatefulSet")["spec"]
    scaled_object = one(rendered, "ScaledObject")["metadata"]["name"]
    calls.clear()
    deferred = launcher.scale(request, 5)
    assert deferred.action == "unchanged" and "KEDA" in deferred.reason and calls == []
    changed = resolve_app({**SPEC, "app_config": {"big_order_amount": 5000}})
    launcher.ensure(changed.deployment_request({"bootstrap_servers": "kafka:9092"}, {}, workers=2))
    assert _verbs(calls) == [
        "kubectl annotate scaledobject",
        "kubectl wait --for=delete",
        "helm upgrade --install",
        "kubectl annotate scaledobject",
    ]
    assert calls[0][3:5] == [scaled_object, f"{KEDA_PAUSED_ANNOTATION}=0"]
    assert calls[3][3:5] == [scaled_object, f"{KEDA_PAUSED_ANNOTATION}-"]
