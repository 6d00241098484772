"""The Helm chart, rendered, linted and schema-checked by the real Helm v4 engine.

Every manifest is validated against the Kubernetes schemas (strict: unknown fields fail) and
the prometheus-operator CRD models; the wiring that makes a StatefulSet of stream workers
correct is asserted on the rendered objects; and one test starts a real worker from the
rendered pod spec (args, env as the kubelet builds it, the ConfigMap's StreamsConfig) on the
broker and probes it where the chart's probes point.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from platform_streams.kafka import KafkaAdmin
from tests.helm.chart_support import (
    CHART,
    NAMESPACE,
    RELEASE,
    REPO,
    lint,
    manifests,
    notes,
    one,
    pod_environment,
    render,
    rendered_secrets,
    streams_yaml,
    validate,
    worker_container,
)
from tests.support.kafka import new_topic

pytestmark = pytest.mark.helm

FULLNAME = f"{RELEASE}-platform-streams"
HEADLESS = f"{FULLNAME}-headless"
SECRETS = {
    "kafka-sasl": {"username": "streams", "password": "s3cret"},
    "kafka-tls": {"ca.crt": "-", "tls.crt": "-", "tls.key": "-"},
    "streams-http": {"token": "t0ken"},
}

#: Every optional feature on (and most knobs off their defaults).
ALL_ON: dict[str, Any] = {
    "replicaCount": 4,
    "image": {"digest": "sha256:" + "a" * 64, "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "registry"}],
    "app": {
        "config": {
            "application_id": "orders-app",
            "bootstrap_servers": "kafka-0:9093,kafka-1:9093",
            "processing.guarantee": "exactly_once_v2",
            "num_stream_threads": 2,
        },
        "extraArgs": ["--set", "poll_ms=50"],
        "logLevel": "DEBUG",
    },
    "http": {"port": 9000, "auth": {"existingSecret": "streams-http", "key": "token"}},
    "kafka": {
        "securityProtocol": "SASL_SSL",
        "sasl": {"mechanism": "SCRAM-SHA-512", "existingSecret": "kafka-sasl"},
        "tls": {"existingSecret": "kafka-tls", "certKey": "tls.crt", "keyKey": "tls.key"},
    },
    "persistence": {"storageClass": "fast-ssd", "size": "50Gi", "annotations": {"backup": "no"}},
    "serviceAccount": {"annotations": {"iam": "role"}},
    "metrics": {
        "service": {"annotations": {"prometheus.io/scrape": "true"}},
        "serviceMonitor": {
            "enabled": True,
            "namespace": "monitoring",
            "labels": {"release": "kube-prometheus-stack"},
            "interval": "15s",
            "relabelings": [
                {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "pod"}
            ],
            "metricRelabelings": [{"action": "drop", "regex": "python_gc_.*", "sourceLabels": ["__name__"]}],
        },
        "podMonitor": {"enabled": True, "labels": {"team": "streams"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    },
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Streams"}},
    "pdb": {"maxUnavailable": None, "minAvailable": 2},
    "reset": {"enabled": True, "extraArgs": ["--to-datetime", "2024-05-01T00:00:00Z"]},
    "podAnnotations": {"team": "streams"},
    "podLabels": {"tier": "processing"},
    "priorityClassName": "streams-high",
    "nodeSelector": {"disk": "ssd"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "streams", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "platform-streams"}},
                    },
                }
            ]
        }
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "platform-streams"}},
        }
    ],
    "extraEnv": [{"name": "ORDERS_TOPIC", "value": "orders-v2"}],
    "extraEnvFrom": [{"configMapRef": {"name": "app-settings"}}],
    "extraVolumes": [{"name": "lookup", "configMap": {"name": "lookup-tables"}}],
    "extraVolumeMounts": [{"name": "lookup", "mountPath": "/data/lookup", "readOnly": True}],
}


def _assert_lint_clean(values: dict[str, Any] | None) -> None:
    report = lint(values)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["total_charts_linted"] == 1
    assert not report["errors"] and not problems, report
    # Only the informational "icon is recommended" may remain.
    assert {m["error"] for m in report["messages"]} <= {"icon is recommended"}, report


def _container_security(container: dict[str, Any]) -> None:
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True and context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["seccompProfile"]["type"] == "RuntimeDefault"


# ---------------------------------------------------------------------------------- render


def test_default_values_render_lint_clean_and_validate_against_kubernetes() -> None:
    _assert_lint_clean(None)
    rendered = render()
    docs = manifests(rendered)
    for doc in docs:
        validate(doc)
    kinds = sorted(doc["kind"] for doc in docs)
    assert kinds == [
        "ConfigMap",
        "Pod",  # the `helm test` hook (tests/helm/test_chart_kubernetes.py)
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "Service",
        "ServiceAccount",
        "StatefulSet",
    ]
    assert f"statefulset/{FULLNAME}" in notes(rendered)


def test_every_optional_feature_on_renders_lint_clean_and_validates() -> None:
    _assert_lint_clean(ALL_ON)
    rendered = render(ALL_ON)
    docs = manifests(rendered)
    for doc in docs:
        validate(doc)
    kinds = {doc["kind"] for doc in docs}
    assert {
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
        "Job",
        "PodDisruptionBudget",
        "StatefulSet",
    } <= kinds
    dashboards = [
        d for d in docs if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]
    ]
    assert len(dashboards) == len(list((REPO / "grafana" / "dashboards").glob("*.json"))) >= 4
    pod = one(rendered, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"disk": "ssd"} and pod["priorityClassName"] == "streams-high"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["containers"][0]["image"] == "ghcr.io/platform-streams/platform-streams@sha256:" + "a" * 64
    text = notes(rendered)
    assert "ServiceMonitor" in text and "PodMonitor" in text and "reset.enabled is true" in text


def test_every_container_is_hardened() -> None:
    rendered = render(ALL_ON)
    statefulset = one(rendered, "StatefulSet")
    job = one(rendered, "Job")
    pods = [statefulset["spec"]["template"]["spec"], job["spec"]["template"]["spec"]]
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        containers = pod["containers"] + pod.get("initContainers", [])
        for container in containers:
            _container_security(container)
            assert container["resources"]["limits"]["memory"]
    assert len(pods[0]["initContainers"]) == 1


# ---------------------------------------------------------------------------------- wiring


def test_static_membership_and_query_routing_come_from_the_pod_identity() -> None:
    rendered = render()
    statefulset = one(rendered, "StatefulSet")
    headless = one(rendered, "Service", HEADLESS)
    spec = statefulset["spec"]
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == HEADLESS
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    assert spec["selector"]["matchLabels"] == headless["spec"]["selector"]

    env = pod_environment(
        worker_container(rendered), pod_name=f"{FULLNAME}-2", secrets=rendered_secrets(rendered)
    )
    assert env["PLATFORM_STREAMS_GROUP_INSTANCE_ID"] == f"{FULLNAME}-2"
    assert env["PLATFORM_STREAMS_APPLICATION_SERVER"] == (
        f"{FULLNAME}-2.{HEADLESS}.{NAMESPACE}.svc.cluster.local:8080"
    )
    group_id_source = next(
        e for e in worker_container(rendered)["env"] if e["name"] == "PLATFORM_STREAMS_GROUP_INSTANCE_ID"
    )
    assert group_id_source["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}

    off = render({"staticMembership": {"enabled": False}, "queryRouting": {"enabled": False}})
    names = {e["name"] for e in worker_container(off)["env"]}
    assert not names & {"PLATFORM_STREAMS_GROUP_INSTANCE_ID", "PLATFORM_STREAMS_APPLICATION_SERVER"}


def test_rack_awareness_passes_the_pod_zone_as_a_client_tag(tmp_path: Path) -> None:
    from platform_streams.cli_app_loader import load_config

    rendered = render({"rackAwareness": {"enabled": True}})
    zone = "topology.kubernetes.io/zone"
    env = pod_environment(
        worker_container(rendered),
        pod_name=f"{FULLNAME}-0",
        labels={zone: "eu-1b"},
        secrets=rendered_secrets(rendered),
    )
    path = tmp_path / "streams.yaml"
    path.write_text(one(rendered, "ConfigMap", FULLNAME)["data"]["streams.yaml"])
    config = load_config(path, [], env=env)
    assert config.client_tags == {"zone": "eu-1b"} and config.rack_aware_assignment_tags == ["zone"]
    assert "PS_RACK" not in {e["name"] for e in worker_container(render())["env"]}, "off by default"


def test_the_state_volume_is_a_claim_per_pod_mounted_at_state_dir() -> None:
    rendered = render({"persistence": {"mountPath": "/data/state", "size": "20Gi"}})
    spec = one(rendered, "StatefulSet")["spec"]
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    mounts = {m["name"]: m["mountPath"] for m in worker_container(rendered)["volumeMounts"]}
    assert mounts["state"] == "/data/state"
    assert streams_yaml(rendered)["state_dir"] == "/data/state"
    assert not any(v["name"] == "state" for v in spec["template"]["spec"]["volumes"])
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}

    ephemeral = render({"persistence": {"enabled": False}})
    spec = one(ephemeral, "StatefulSet")["spec"]
    assert "volumeClaimTemplates" not in spec
    assert {"name": "state", "emptyDir": {}} in spec["template"]["spec"]["volumes"]
    assert "persistence is disabled" in notes(ephemeral)


def test_probes_and_services_point_at_the_worker_http_port() -> None:
    rendered = render(ALL_ON)
    container = worker_container(rendered)
    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": 9000, "protocol": "TCP"}
    assert streams_yaml(rendered)["http_port"] == 9000 and streams_yaml(rendered)["http_host"] == "0.0.0.0"
    probes = {
        name: container[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes == {
        "startupProbe": {"path": "/health/live", "port": "http"},
        "livenessProbe": {"path": "/health/live", "port": "http"},
        "readinessProbe": {"path": "/health/ready", "port": "http"},
    }
    metrics_service = one(rendered, "Service", f"{FULLNAME}-metrics")
    (service_port,) = metrics_service["spec"]["ports"]
    assert service_port["targetPort"] == "http"
    monitor = one(rendered, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics_service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service_port["name"] and endpoint["path"] == "/metrics"
    # /metrics needs the token when one is set: the monitors send it from the same Secret.
    assert endpoint["authorization"]["credentials"] == {"name": "streams-http", "key": "token"}
    (pod_endpoint,) = one(rendered, "PodMonitor")["spec"]["podMetricsEndpoints"]
    assert pod_endpoint["port"] == "http" and pod_endpoint["authorization"] == endpoint["authorization"]


def test_termination_grace_outlasts_the_close_timeout() -> None:
    rendered = render({"app": {"closeTimeoutSeconds": 100}, "terminationGracePeriodSeconds": 130})
    container = worker_container(rendered)
    args = container["args"]
    assert args[args.index("--close-timeout") + 1] == "100"
    assert one(rendered, "StatefulSet")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 130
    with pytest.raises(helm.HelmRenderError, match=r"terminationGracePeriodSeconds \(60\) must be greater"):
        render({"terminationGracePeriodSeconds": 60})


def test_config_checksum_rolls_pods_only_when_the_config_changes() -> None:
    def checksum(values: dict[str, Any]) -> str:
        annotations = one(render(values), "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/config"])

    base = {"app": {"config": {"commit_interval_ms": 1000}}}
    first = checksum(base)
    assert len(first) == 64
    assert checksum(base) == first
    assert checksum({**base, "replicaCount": 7}) == first  # not a config change
    assert checksum({"app": {"config": {"commit_interval_ms": 2000}}}) != first
    assert checksum({**base, "persistence": {"mountPath": "/elsewhere"}}) != first  # state_dir is config


def test_sasl_and_tls_come_from_secret_references_only() -> None:
    rendered = render(ALL_ON)
    config = streams_yaml(rendered)
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["ssl.ca.location"] == "/etc/platform-streams/tls/ca.crt"
    assert config["ssl.key.location"] == "/etc/platform-streams/tls/tls.key"
    everything = json.dumps(manifests(rendered))
    assert "s3cret" not in everything and "t0ken" not in everything
    env = pod_environment(worker_container(rendered), pod_name=f"{FULLNAME}-0", secrets=SECRETS)
    assert json.loads(env["PLATFORM_STREAMS_CLIENT_CONFIG"]) == {
        "sasl.username": "streams",
        "sasl.password": "s3cret",
    }
    assert env["PLATFORM_STREAMS_HTTP_AUTH_TOKEN"] == "t0ken"
    mounts = {m["name"]: m for m in worker_container(rendered)["volumeMounts"]}
    assert mounts["kafka-tls"]["readOnly"] is True


def test_the_rendered_config_and_env_load_as_the_worker_loads_them(tmp_path: Path) -> None:
    from platform_streams.cli_app_loader import load_config

    rendered = render(ALL_ON)
    path = tmp_path / "streams.yaml"
    path.write_text(one(rendered, "ConfigMap", FULLNAME)["data"]["streams.yaml"])
    env = pod_environment(worker_container(rendered), pod_name=f"{FULLNAME}-1", secrets=SECRETS)
    config = load_config(path, [], env=env)
    assert config.group_instance_id == f"{FULLNAME}-1"
    assert config.application_server == f"{FULLNAME}-1.{HEADLESS}.{NAMESPACE}.svc.cluster.local:9000"
    assert str(config.state_dir) == "/var/lib/platform-streams"
    assert config.http_port == 9000 and config.http_host == "0.0.0.0"
    assert config.http_auth_token is not None and config.http_auth_token.get_secret_value() == "t0ken"
    assert config.processing_guarantee == "exactly_once_v2"
    consumer = config.consumer_configs(1)
    assert consumer["group.instance.id"] == f"{FULLNAME}-1-2"  # second stream thread of pod 1
    assert consumer["sasl.password"] == "s3cret" and consumer["security.protocol"] == "SASL_SSL"


def test_the_endpoint_token_is_generated_by_default_and_reaches_pods_and_monitors(tmp_path: Path) -> None:
    from platform_streams.cli_app_loader import load_config

    monitors = {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}
    rendered = render({"metrics": monitors})
    secret = one(rendered, "Secret", f"{FULLNAME}-http-auth")
    validate(secret)
    token = rendered_secrets(rendered)[f"{FULLNAME}-http-auth"]["token"]
    assert re.fullmatch(r"[A-Za-z0-9]{48}", token)
    assert token != rendered_secrets(render())[f"{FULLNAME}-http-auth"]["token"]  # random per install
    reference = {"name": f"{FULLNAME}-http-auth", "key": "token"}
    env = {e["name"]: e for e in worker_container(rendered)["env"]}
    assert env["PLATFORM_STREAMS_HTTP_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == reference
    # Prometheus sends the same token (the scrape would be 401 without it)
    endpoint = one(rendered, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": reference}
    assert (
        one(rendered, "PodMonitor")["spec"]["podMetricsEndpoints"][0]["authorization"]
        == endpoint["authorization"]
    )
    # the worker loads it exactly as the pod would
    path = tmp_path / "streams.yaml"
    path.write_text(one(rendered, "ConfigMap", FULLNAME)["data"]["streams.yaml"])
    pod_env = pod_environment(
        worker_container(rendered), pod_name=f"{FULLNAME}-0", secrets=rendered_secrets(rendered)
    )
    config = load_config(path, [], env=pod_env)
    assert config.http_host == "0.0.0.0" and config.http_auth_token is not None
    assert config.http_auth_token.get_secret_value() == token
    assert "Authorization: Bearer $TOKEN" in notes(rendered) and "WARNING: http.auth" not in notes(rendered)

    # your own Secret replaces the generated one
    own = render({"http": {"auth": {"existingSecret": "mine", "key": "t"}}})
    assert not [d for d in manifests(own) if d["kind"] == "Secret"]
    mine = {e["name"]: e for e in worker_container(own)["env"]}["PLATFORM_STREAMS_HTTP_AUTH_TOKEN"]
    assert mine["valueFrom"]["secretKeyRef"] == {"name": "mine", "key": "t"}

    # opting out: no token anywhere, and NOTES says what that exposes
    bare = render({"http": {"auth": {"generate": False}}, "metrics": monitors})
    assert not [d for d in manifests(bare) if d["kind"] == "Secret"]
    assert "PLATFORM_STREAMS_HTTP_AUTH_TOKEN" not in {e["name"] for e in worker_container(bare)["env"]}
    assert "authorization" not in one(bare, "ServiceMonitor")["spec"]["endpoints"][0]
    assert "WARNING: http.auth.generate is false" in notes(bare)
    _assert_lint_clean({"http": {"auth": {"generate": False}}})


def test_dashboards_are_config_maps_labelled_for_the_grafana_sidecar() -> None:
    files = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
    rendered = render({"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1"}})
    maps = [
        d for d in manifests(rendered) if d["kind"] == "ConfigMap" and "-dashboard-" in d["metadata"]["name"]
    ]
    assert len(maps) == len(files)
    by_key = {key: (doc, value) for doc in maps for key, value in doc["data"].items()}
    for file in files:
        doc, value = by_key[file.name]
        assert doc["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(value) == json.loads(file.read_text())
    custom = render(
        {"dashboards": {"enabled": True, "label": "dashboards.example/load", "labelValue": "yes"}}
    )
    labels = [d["metadata"]["labels"] for d in manifests(custom) if "-dashboard-" in d["metadata"]["name"]]
    assert labels and all(label["dashboards.example/load"] == "yes" for label in labels)
    assert not [d for d in manifests(render()) if "-dashboard-" in d["metadata"]["name"]]


def test_the_prometheus_rule_carries_the_rule_files_verbatim() -> None:
    """The chart's PrometheusRule and grafana/rules/*.rules.yml are one source: same groups."""
    files = sorted((REPO / "grafana" / "rules").glob("*.rules.yml"))
    expected = [group for file in files for group in yaml.safe_load(file.read_text())["groups"]]
    assert len(expected) == 2
    rendered = render({"metrics": {"prometheusRule": {"enabled": True, "labels": {"team": "streams"}}}})
    rule = one(rendered, "PrometheusRule")
    validate(rule)
    assert rule["spec"]["groups"] == expected
    assert rule["metadata"]["labels"]["team"] == "streams"
    assert rule["metadata"]["namespace"] == NAMESPACE
    alerts_only = render(
        {"metrics": {"prometheusRule": {"enabled": True, "compatibilityRecordingRules": False}}}
    )
    groups = one(alerts_only, "PrometheusRule")["spec"]["groups"]
    assert [g["name"] for g in groups] == ["platform-streams.alerts"]
    assert not [d for d in manifests(render()) if d["kind"] == "PrometheusRule"]


def test_the_reset_job_is_a_pre_upgrade_hook_and_pods_wipe_state_once() -> None:
    rendered = render(ALL_ON, revision=5, is_upgrade=True)
    job = one(rendered, "Job")
    hook_config = one(rendered, "ConfigMap", f"{FULLNAME}-reset")
    for doc in (job, hook_config):
        assert doc["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    assert int(hook_config["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        job["metadata"]["annotations"]["helm.sh/hook-weight"]
    )
    assert hook_config["data"] == one(rendered, "ConfigMap", FULLNAME)["data"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("reset") + 1] == "examples.orders_app:topology"
    assert {"--yes", "--force", "--keep-local-state", "--to-datetime"} <= set(args)
    assert job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == f"{FULLNAME}-reset"
    env = pod_environment(container, pod_name="reset", secrets=SECRETS)
    assert "sasl.password" in env["PLATFORM_STREAMS_CLIENT_CONFIG"]
    pod = one(rendered, "StatefulSet")["spec"]["template"]["spec"]
    (wipe,) = pod["initContainers"]
    wipe_env = {e["name"]: e["value"] for e in wipe["env"]}
    assert wipe_env == {"STATE_DIR": "/var/lib/platform-streams", "RESET_ID": "5"}
    assert "Job" not in {d["kind"] for d in manifests(render())}


def test_the_wipe_script_clears_state_once_per_reset(tmp_path: Path) -> None:
    pod = one(render({"reset": {"enabled": True}}, revision=3), "StatefulSet")["spec"]["template"]["spec"]
    (wipe,) = pod["initContainers"]
    state = tmp_path / "state"
    (state / "orders-app" / "0_1").mkdir(parents=True)
    (state / "lost+found").mkdir()
    env = {**os.environ, "STATE_DIR": str(state), "RESET_ID": "3"}
    first = subprocess.run(wipe["command"], env=env, capture_output=True, text=True, check=True)
    assert "wiped" in first.stdout
    assert sorted(p.name for p in state.iterdir()) == [".platform-streams-reset", "lost+found"]
    (state / "orders-app").mkdir()  # state written after the reset must survive restarts
    again = subprocess.run(wipe["command"], env=env, capture_output=True, text=True, check=True)
    assert again.stdout == "" and (state / "orders-app").exists()


# ---------------------------------------------------------------------------------- schema


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": -1}, r"at '/replicaCount': minimum: got -1, want 0"),
        ({"image": {"pullPolicy": "Sometimes"}}, r"at '/image/pullPolicy': value must be one of"),
        ({"app": {"factory": "orders_app"}}, r"at '/app/factory': 'orders_app' does not match pattern"),
        (
            {"app": {"config": {"application_id": None}}},
            r"at '/app/config': missing property 'application_id'",
        ),
        ({"persistence": {"mountPath": "state"}}, r"at '/persistence/mountPath'"),
        ({"http": {"port": 70000}}, r"at '/http/port': maximum"),
        ({"metrics": {"serviceMonitor": {"interval": "soon"}}}, r"at '/metrics/serviceMonitor/interval'"),
        ({"kafka": {"sasl": {"mechanism": "GSSAPI"}}}, r"at '/kafka/sasl/mechanism': value must be one of"),
        ({"replicas": 3}, r"additional properties 'replicas' not allowed"),
    ],
)
def test_the_schema_rejects_bad_values_naming_the_key(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=message), helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
    report = lint(values)  # `helm lint --strict` reports the same problem as an error
    assert any(re.search(message, error) for error in report["errors"]), report


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"app": {"config": {"state.dir": "/x"}}},
            r"app.config.state.dir is set by the chart: use persistence.mountPath",
        ),
        (
            {"app": {"config": {"group_instance_id": "a"}}},
            r"app.config.group_instance_id is set by the chart",
        ),
        ({"pdb": {"minAvailable": 1}}, r"set only one of pdb.maxUnavailable and pdb.minAvailable"),
        ({"app": {"extraArgs": ["--workers", "2"]}}, r"--workers starts several processes in one pod"),
        ({"kafka": {"sasl": {"existingSecret": "s"}}}, r"kafka.sasl.mechanism is empty"),
        (
            {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
            r"needs metrics.service",
        ),
        (
            {"metrics": {"podMonitor": {"enabled": True, "namespace": "monitoring"}}},
            r"metrics.podMonitor.namespace \(monitoring\) is not the release namespace.*existingSecret",
        ),
    ],
)
def test_inconsistent_values_fail_with_a_clear_message(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(values)


# ---------------------------------------------------------------------------------- a real pod


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def _poll(condition: Any, timeout_s: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> Any:
    """Poll until ``condition()`` is truthy; fail at once (with the worker's log) if it exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(
                f"the worker exited ({proc.returncode}) before {what}:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}:\n{log.read_text()[-3000:]}")


@pytest.mark.broker
def test_a_worker_started_from_the_rendered_pod_spec_passes_its_probes_and_stops_in_grace(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """Plays the kubelet: the container's args and env, the ConfigMap as the config file, the
    state volume at its mount path; then probes the worker where the chart's probes point,
    checks static membership on the broker, and SIGTERMs it like a pod deletion."""
    port, app_id = _free_port(), f"helm-{uuid.uuid4().hex[:10]}"
    topics = {name: new_topic(admin, 2, name) for name in ("orders", "big-orders", "by-customer")}
    values = {
        "http": {"port": port},
        "persistence": {"mountPath": str(tmp_path / "state")},
        "app": {
            "config": {
                "application_id": app_id,
                "bootstrap_servers": bootstrap_servers,
                "commit_interval_ms": 200,
                "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 500,
                "max_poll_interval_ms": 10000,
            },
            "closeTimeoutSeconds": 20,
            "logLevel": "DEBUG",
        },
        "terminationGracePeriodSeconds": 30,
        "extraEnv": [
            {"name": "ORDERS_TOPIC", "value": topics["orders"]},
            {"name": "BIG_ORDERS_TOPIC", "value": topics["big-orders"]},
            {"name": "ORDERS_BY_CUSTOMER_TOPIC", "value": topics["by-customer"]},
        ],
    }
    rendered = render(values)
    container = worker_container(rendered)
    pod_name = f"{FULLNAME}-0"
    config_file = tmp_path / "streams.yaml"
    config_file.write_text(one(rendered, "ConfigMap", FULLNAME)["data"]["streams.yaml"])
    args = list(container["args"])
    args[args.index("--config") + 1] = str(config_file)
    secrets = rendered_secrets(rendered)  # the default: the chart's generated token
    env = {**os.environ, **pod_environment(container, pod_name=pod_name, secrets=secrets)}
    token = secrets[f"{FULLNAME}-http-auth"]["token"]
    entrypoint = Path(sys.executable).with_name("platform-streams")
    probes = {
        name: container[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    probe_port = {p["name"]: p["containerPort"] for p in container["ports"]}
    log_path = tmp_path / "worker.log"
    log = log_path.open("w")
    proc = subprocess.Popen([str(entrypoint), *args], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        for name in ("startupProbe", "livenessProbe", "readinessProbe"):
            probe = probes[name]
            _poll(
                lambda p=probe: _get(probe_port[p["port"]], p["path"])[0] == 200,
                30,
                f"{name} to pass",
                proc,
                log_path,
            )
        assert _get(port, "/state")[0] == 401  # the generated token is required
        status, body = _get(port, "/state", token)
        assert status == 200
        state = json.loads(body)
        assert state["application_id"] == app_id and state["state"] == "RUNNING"
        assert state["application_server"] == f"{pod_name}.{HEADLESS}.{NAMESPACE}.svc.cluster.local:{port}"
        # Static membership: the settings the worker started with (logged at DEBUG), and the
        # group's member on a broker that describes members (Apache Kafka; Tansu lists none).
        assert f"'group_instance_id': '{pod_name}'" in log_path.read_text()
        members = admin.describe_group(app_id).members
        assert all(m.group_instance_id == pod_name for m in members)
        assert (tmp_path / "state" / app_id).is_dir()
        proc.send_signal(signal.SIGTERM)  # what the kubelet does when the pod is deleted
        grace = one(rendered, "StatefulSet")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert proc.wait(timeout=grace) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
