"""The chart's Kubernetes operations: KEDA autoscaling on consumer lag, zone spreading with
the zone handed to the client as ``client.rack``, and the ``helm test`` hook.

Rendered by the real Helm v4 engine; Kubernetes objects validated strictly against the
Kubernetes schemas, the ScaledObject against KEDA's CRD (cloudcoil-models-keda).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from platform_streams.kafka import KafkaAdmin
from tests.helm.chart_support import (
    RELEASE,
    REPO,
    lint,
    manifests,
    one,
    pod_environment,
    render,
    validate,
    worker_container,
)
from tests.support.kafka import new_topic

pytestmark = pytest.mark.helm

FULLNAME = f"{RELEASE}-platform-streams"
KEDA: dict[str, Any] = {
    "autoscaling": {
        "keda": {
            "enabled": True,
            "topics": ["orders", "orders-app-by-customer-repartition"],
            "partitions": 6,
            "minReplicas": 2,
            "maxReplicas": 6,
            "lagThreshold": 500,
            "authenticationRef": "kafka-keda-auth",
            "extraTriggerMetadata": {"sasl": "scram_sha512", "tls": "enable"},
        }
    }
}


def test_keda_scales_the_statefulset_on_the_lag_of_every_topic_the_group_reads() -> None:
    assert lint(KEDA)["errors"] == []
    rendered = render(KEDA)
    for doc in manifests(rendered):
        validate(doc)
    statefulset = one(rendered, "StatefulSet")
    assert "replicas" not in statefulset["spec"], "KEDA owns the replica count"
    scaled = one(rendered, "ScaledObject")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": FULLNAME}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 6)
    triggers = spec["triggers"]
    assert [t["metadata"]["topic"] for t in triggers] == KEDA["autoscaling"]["keda"]["topics"]
    for trigger in triggers:
        assert trigger["type"] == "kafka"
        assert trigger["authenticationRef"] == {"name": "kafka-keda-auth"}
        meta = trigger["metadata"]
        # the consumer group of a stream application is its application id
        assert meta["consumerGroup"] == "orders-app" and meta["bootstrapServers"] == "kafka:9092"
        assert meta["lagThreshold"] == "500" and meta["allowIdleConsumers"] == "false"
        assert (meta["sasl"], meta["tls"]) == ("scram_sha512", "enable")


def test_without_keda_the_replica_count_is_the_charts() -> None:
    rendered = render({"replicaCount": 5})
    assert one(rendered, "StatefulSet")["spec"]["replicas"] == 5
    assert not [d for d in manifests(rendered) if d["kind"] == "ScaledObject"]


def _keda(**overrides: Any) -> dict[str, Any]:
    return {"autoscaling": {"keda": {**KEDA["autoscaling"]["keda"], **overrides}}}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (_keda(maxReplicas=8), r"maxReplicas \(8\) is above autoscaling.keda.partitions \(6\)"),
        (_keda(minReplicas=4, maxReplicas=3), r"minReplicas \(4\) is above autoscaling.keda.maxReplicas"),
        (_keda(topics=[]), r"autoscaling.keda.topics is empty"),
        (
            {**_keda(), "app": {"config": {"bootstrap_servers": None}}},
            r"autoscaling.keda.bootstrapServers",
        ),
    ],
)
def test_keda_values_beyond_the_partition_count_fail_clearly(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(values)


def test_keda_bootstrap_servers_may_come_from_the_keda_values() -> None:
    values = {
        "app": {"config": {"bootstrap_servers": None}},  # null deletes the default
        **_keda(bootstrapServers="kafka-0:9093"),
    }
    trigger = one(render(values), "ScaledObject")["spec"]["triggers"][0]
    assert trigger["metadata"]["bootstrapServers"] == "kafka-0:9093"


ZONE = "topology.kubernetes.io/zone"


def test_workers_spread_over_zones_and_hosts_by_default() -> None:
    rendered = render()
    pod = one(rendered, "StatefulSet")["spec"]["template"]["spec"]
    selector = {"app.kubernetes.io/name": "platform-streams", "app.kubernetes.io/instance": RELEASE}
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        }
    ]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": selector},
    }
    # the user's own affinity replaces the default; their constraints come after the zone one
    mine = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["streams"]}]}
                ]
            }
        }
    }
    extra = {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
    custom = render({"affinity": mine, "topologySpreadConstraints": [extra]})
    pod = one(custom, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["affinity"] == mine
    assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [ZONE, "kubernetes.io/hostname"]
    off = render({"zones": {"spread": False, "hostAntiAffinity": False}})
    pod = one(off, "StatefulSet")["spec"]["template"]["spec"]
    assert "affinity" not in pod and "topologySpreadConstraints" not in pod
    for doc in manifests(rendered) + manifests(custom) + manifests(off):
        validate(doc)


def test_the_pod_zone_reaches_the_consumers_as_client_rack(tmp_path: Path) -> None:
    from platform_streams.cli_app_loader import load_config

    rendered = render()
    path = tmp_path / "streams.yaml"
    path.write_text(one(rendered, "ConfigMap")["data"]["streams.yaml"])
    container = worker_container(rendered)
    env = pod_environment(
        container, pod_name=f"{FULLNAME}-0", labels={ZONE: "eu-west-1b"}, secrets=_no_token()
    )
    config = load_config(path, [], env=env)
    assert config.client_rack == "eu-west-1b"
    assert config.consumer_configs()["client.rack"] == "eu-west-1b"
    assert config.restore_consumer_configs()["client.rack"] == "eu-west-1b"
    # a node without a zone label: the Downward API gives "", client.rack stays unset
    env = pod_environment(container, pod_name=f"{FULLNAME}-0", secrets=_no_token())
    assert "client.rack" not in load_config(path, [], env=env).consumer_configs()
    off = worker_container(render({"zones": {"clientRackLabel": ""}}))
    assert "PLATFORM_STREAMS_CLIENT_RACK" not in {e["name"] for e in off["env"]}


def _no_token() -> dict[str, dict[str, str]]:
    return {f"{FULLNAME}-http-auth": {"token": "x"}}


@pytest.mark.broker
def test_helm_test_validates_the_internal_topics_with_the_release_settings(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """Plays the kubelet for the `helm test` pod: its args and env, the release's ConfigMap as
    the config file; exit 1 while the internal topics are missing, 0 once they exist."""
    app_id = f"helm-test-{uuid.uuid4().hex[:10]}"
    topics = {name: new_topic(admin, 2, name) for name in ("orders", "big-orders", "by-customer")}
    values = {
        "app": {"config": {"application_id": app_id, "bootstrap_servers": bootstrap_servers}},
        "extraEnv": [
            {"name": "ORDERS_TOPIC", "value": topics["orders"]},
            {"name": "BIG_ORDERS_TOPIC", "value": topics["big-orders"]},
            {"name": "ORDERS_BY_CUSTOMER_TOPIC", "value": topics["by-customer"]},
        ],
    }
    rendered = render(values)
    test_pod = one(rendered, "Pod")
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    validate(test_pod)
    (container,) = test_pod["spec"]["containers"]
    mounted = {v["name"]: v for v in test_pod["spec"]["volumes"]}
    assert mounted["config"]["configMap"]["name"] == FULLNAME  # the release's own StreamsConfig
    config_file = tmp_path / "streams.yaml"
    config_file.write_text(one(rendered, "ConfigMap", FULLNAME)["data"]["streams.yaml"])
    args = list(container["args"])
    assert args[args.index("topics") : args.index("topics") + 2] == ["topics", "validate"]
    args[args.index("--config") + 1] = str(config_file)
    env = {**os.environ, **pod_environment(container, pod_name=test_pod["metadata"]["name"])}
    entrypoint = [str(Path(sys.executable).with_name("platform-streams")), *args]

    def helm_test() -> subprocess.CompletedProcess[str]:
        return subprocess.run(entrypoint, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)

    try:
        missing = helm_test()
        assert missing.returncode == 1, missing.stdout + missing.stderr
        assert "missing" in missing.stdout
        create = [*entrypoint]
        create[create.index("validate")] = "create"
        created = subprocess.run(create, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert created.returncode == 0, created.stdout + created.stderr
        passed = helm_test()
        assert passed.returncode == 0, passed.stdout + passed.stderr
    finally:
        admin.delete_topics([t for t in admin.list_topics() if t.startswith(app_id)] + list(topics.values()))


@pytest.mark.broker
def test_topics_keda_prints_values_the_chart_turns_into_triggers(
    bootstrap_servers: str,
    admin: KafkaAdmin,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`platform-streams topics keda` reads the topics from the topology plan and the broker:
    the input topic and the repartition topic (re-keyed by customer), sized by partitions."""
    import yaml

    from platform_streams.cli import main

    app_id = f"keda-{uuid.uuid4().hex[:10]}"
    topics = {"orders": new_topic(admin, 3, "orders"), "big": new_topic(admin, 1, "big")}
    topics["by-customer"] = new_topic(admin, 1, "by-customer")
    monkeypatch.setenv("ORDERS_TOPIC", topics["orders"])
    monkeypatch.setenv("BIG_ORDERS_TOPIC", topics["big"])
    monkeypatch.setenv("ORDERS_BY_CUSTOMER_TOPIC", topics["by-customer"])
    args = ["topics", "keda", "examples.orders_app:topology", "--set", f"application.id={app_id}"]
    args += ["--set", f"bootstrap.servers={bootstrap_servers}"]
    try:
        assert main(args) == 0
        values = yaml.safe_load(capsys.readouterr().out)
    finally:
        admin.delete_topics(list(topics.values()))
    keda = values["autoscaling"]["keda"]
    assert keda["topics"][0] == topics["orders"]
    repartition = [t for t in keda["topics"] if t.endswith("-repartition")]
    assert repartition and all(t.startswith(f"{app_id}-") for t in repartition)
    assert keda["partitions"] == 3 and keda["maxReplicas"] == 3
    rendered = render({**values, "app": {"config": {"application_id": app_id}}})
    scaled = one(rendered, "ScaledObject")
    validate(scaled)
    assert [t["metadata"]["topic"] for t in scaled["spec"]["triggers"]] == keda["topics"]
    assert {t["metadata"]["consumerGroup"] for t in scaled["spec"]["triggers"]} == {app_id}
