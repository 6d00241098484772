"""Rendering the chart with the real Helm v4 engine and reading what it produced.

``helm-python-sdk`` binds Helm's own Go SDK, so rendering, schema validation and lint here
are exactly ``helm template`` / ``helm lint``. Rendered manifests are checked with
``kubernetes-validate`` (the Kubernetes OpenAPI schemas of one release, strict: unknown
fields fail) and, for the prometheus-operator kinds, with the typed models generated from
its CRDs. :func:`pod_environment` plays the kubelet's part for env vars (fieldRef,
secretKeyRef, ``$(VAR)`` expansion) so a test can start the worker exactly as a pod would.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml
from cloudcoil.models.keda.v1alpha1 import ScaledObject
from cloudcoil.models.prometheus_operator.v1 import PodMonitor, PrometheusRule, ServiceMonitor
from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "platform-streams"
RELEASE = "orders"
NAMESPACE = "streams"
#: The Kubernetes release the manifests are validated against (and lint's kube_version).
K8S_VERSION = "1.34.0"

Manifest = dict[str, Any]

_CRD_MODELS: dict[str, type[BaseModel]] = {
    "ServiceMonitor": ServiceMonitor,
    "PodMonitor": PodMonitor,
    "PrometheusRule": PrometheusRule,
    # KEDA's ScaledObject, typed from its CRD (cloudcoil-models-keda)
    "ScaledObject": ScaledObject,
}


@contextmanager
def loaded_chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as chart:
        yield chart


def render(values: Mapping[str, Any] | None = None, **options: Any) -> dict[str, list[Manifest]]:
    """``helm template``: template path -> the objects it rendered (NOTES.txt as text)."""
    options.setdefault("name", RELEASE)
    options.setdefault("namespace", NAMESPACE)
    with loaded_chart() as chart:
        rendered = chart.render(dict(values or {}), **options)
    out: dict[str, list[Manifest]] = {}
    for path, text in rendered.items():
        if path.endswith("NOTES.txt"):
            out[path] = [{"notes": text}]
            continue
        out[path] = [doc for doc in yaml.safe_load_all(text) if doc]
    return out


def manifests(rendered: Mapping[str, list[Manifest]]) -> list[Manifest]:
    """Every Kubernetes object of a render (not NOTES.txt)."""
    return [doc for path, docs in rendered.items() if not path.endswith("NOTES.txt") for doc in docs]


def one(rendered: Mapping[str, list[Manifest]], kind: str, name: str | None = None) -> Manifest:
    found = [
        doc
        for doc in manifests(rendered)
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name)
    ]
    assert len(found) == 1, (
        f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    )
    return found[0]


def notes(rendered: Mapping[str, list[Manifest]]) -> str:
    return str(next(docs[0]["notes"] for path, docs in rendered.items() if path.endswith("NOTES.txt")))


def lint(values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``helm lint --strict`` with ``values``."""
    return helm.lint(
        CHART, dict(values or {}), strict=True, namespace=NAMESPACE, kube_version=f"v{K8S_VERSION}"
    )


def validate(doc: Manifest) -> None:
    """Validate one object against its schema; raises with the failing path on error."""
    model = _CRD_MODELS.get(doc["kind"])
    if model is None:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        return
    # The CRD models ignore unknown fields: a field they drop on the way through is one the
    # CRD does not have (a typo would be silently ignored by the operator too).
    parsed = model.model_validate(doc)
    back = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert _without_empty(back) == _without_empty(doc), f"{doc['kind']} has fields its CRD does not define"


def _without_empty(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_empty(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def worker_container(rendered: Mapping[str, list[Manifest]]) -> Manifest:
    pod = one(rendered, "StatefulSet")["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "worker")


def streams_yaml(rendered: Mapping[str, list[Manifest]], name: str | None = None) -> dict[str, Any]:
    """The StreamsConfig file the ConfigMap carries, parsed."""
    config_map = one(rendered, "ConfigMap", name or f"{RELEASE}-platform-streams")
    loaded: dict[str, Any] = yaml.safe_load(config_map["data"]["streams.yaml"])
    return loaded


def rendered_secrets(rendered: Mapping[str, list[Manifest]]) -> dict[str, dict[str, str]]:
    """The Secrets the chart itself created: name -> key -> decoded value."""
    return {
        doc["metadata"]["name"]: {k: base64.b64decode(v).decode() for k, v in doc.get("data", {}).items()}
        for doc in manifests(rendered)
        if doc["kind"] == "Secret"
    }


_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def pod_environment(
    container: Manifest,
    *,
    pod_name: str,
    namespace: str = NAMESPACE,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment the kubelet would give ``container`` (in declaration order, so
    ``$(VAR)`` sees only the variables defined before it, as in Kubernetes); ``labels``
    are the pod's labels the Downward API may read."""
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    fields.update({f"metadata.labels['{k}']": v for k, v in (labels or {}).items()})
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = _VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), item["value"])
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            # a label the pod lacks reads as an empty string, as the kubelet gives it
            env[item["name"]] = fields.get(path, "") if path.startswith("metadata.labels[") else fields[path]
        else:
            ref = source["secretKeyRef"]
            env[item["name"]] = (secrets or {})[ref["name"]][ref["key"]]
    return env
