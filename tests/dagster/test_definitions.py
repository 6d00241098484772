"""The code location without a broker: it loads and validates, the YAML component and the
factory build the expected graph, the translator can be overridden, wrong specs and run
configs name the wrong field, and the Helm launcher renders values the chart accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from dagster_defs import StreamAppTranslator, StreamAssetProps, build_stream_app_defs, build_streams_defs
from dagster_defs.component import load_app_components
from dagster_defs.definitions import APPS_DIR, build_defs
from dagster_defs.deploy.base import DeploymentRequest
from dagster_defs.deploy.kubernetes import HelmLauncher
from dagster_defs.spec import resolve_app
from platform_streams.errors import StreamsConfigError

pytestmark = pytest.mark.dagster

SPEC = {"name": "shop", "app": "orders", "streams": {"application_id": "shop-app"}}
_NO_RESOURCES = {k: dg.ResourceDefinition.none_resource() for k in ("kafka", "streams_deployment", "spark")}


def _bound(defs: dg.Definitions) -> dg.Definitions:
    """Placeholder resources: enough to build the repository (nothing runs)."""
    return dg.Definitions.merge(defs, dg.Definitions(resources=_NO_RESOURCES))


def _graph(defs: dg.Definitions) -> Any:
    return _bound(defs).get_repository_def().asset_graph


def test_code_location_loads_and_validates() -> None:
    defs = build_defs(APPS_DIR)
    dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {"orders_app", "orders_app/stores/orders_per_customer", "kafka/orders", "kafka/big_orders"} <= keys
    assert {"kafka/orders_by_customer", "kafka/order_counts"} <= keys
    checks = {c.name for c in repo.asset_graph.asset_check_keys}
    assert checks == {
        "consumer_lag",
        "workers_running",
        "dead_letter_not_growing",
        "internal_topics_valid",
        "deploy_gate",
        "shadow_replay_matches",
    }
    assert {
        "orders_app_internal_topics",
        "orders_app_reset",
        "orders_app_compact_store",
        "orders_app_backfill",
        "orders_app_workers",
        "orders_app_shadow_replay",
    } <= set(repo.job_names)
    assert [s.name for s in repo.sensor_defs] == ["orders_app_health"]
    app = repo.asset_graph.get(dg.AssetKey(["orders_app"]))
    assert app.code_version == resolve_app({**SPEC, "name": "orders_app", "streams": {
        "application_id": "orders-app", "commit_interval_ms": 1000, "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500, "max_poll_interval_ms": 10000,
        "deserialization_exception_handler": "log_and_continue",
        "errors_dead_letter_queue_topic_name": "orders-dlq",
    }, "app_config": {"big_order_amount": 100}}).fingerprint  # fmt: skip
    assert app.parent_keys == {dg.AssetKey(["kafka", "orders"])}
    store = repo.asset_graph.get(dg.AssetKey(["orders_app", "stores", "orders_per_customer"]))
    assert store.parent_keys == {dg.AssetKey(["orders_app"])}


def test_yaml_component_and_shared_topics(tmp_path: Path) -> None:
    """Two apps: one writes big-orders, the other reads it -> one topic asset in between."""
    first = {"type": "dagster_defs.component.StreamAppComponent", "attributes": SPEC}
    second_attrs = {
        "name": "audit",
        "app": "orders",
        "app_config": {"orders_topic": "big-orders", "big_orders_topic": "audited", "counts_topic": None,
                       "by_customer_topic": "big-by-customer"},
        "streams": {"application_id": "audit-app"},
    }  # fmt: skip
    second = {"type": "dagster_defs.component.StreamAppComponent", "attributes": second_attrs}
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(first))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(second))
    defs = load_app_components(sorted(tmp_path.glob("*.yaml")))
    graph = _graph(defs)
    big = graph.get(dg.AssetKey(["kafka", "big_orders"]))
    assert big.parent_keys == {dg.AssetKey(["shop"])}
    assert dg.AssetKey(["audit"]) in big.child_keys
    assert not graph.has(dg.AssetKey(["audit", "stores", "orders_per_customer"]))  # counts_topic: None


def test_translator_changes_keys_and_groups() -> None:
    class Prefixed(StreamAppTranslator):
        def get_asset_key(self, props: StreamAssetProps) -> dg.AssetKey:
            return super().get_asset_key(props).with_prefix("prod")

        def get_group_name(self, props: StreamAssetProps) -> str:
            return "streaming"

    graph = _graph(build_stream_app_defs(SPEC, translator=Prefixed()))
    app = graph.get(dg.AssetKey(["prod", "shop"]))
    assert app.group_name == "streaming"
    assert app.parent_keys == {dg.AssetKey(["prod", "kafka", "orders"])}


def test_wrong_specs_name_the_field() -> None:
    with pytest.raises(StreamsConfigError, match="big_order_amount"):
        resolve_app({**SPEC, "app_config": {"big_order_amount": -1}})
    with pytest.raises(StreamsConfigError, match="commit_interval_ms"):
        resolve_app({**SPEC, "streams": {"application_id": "x", "commit_interval_ms": -5}})
    with pytest.raises(ValueError, match="exactly one of 'app'"):
        resolve_app({"name": "x", "streams": {"application_id": "x"}})
    with pytest.raises(StreamsConfigError, match="no app named 'nope'"):
        resolve_app({**SPEC, "app": "nope"})
    job = _bound(build_stream_app_defs(SPEC)).resolve_job_def("shop_compact_store")
    with pytest.raises(dg.DagsterInvalidConfigError, match="store"):
        job.execute_in_process(
            run_config={"ops": {"shop_compact_store_op": {"config": {"store": "no-such-store"}}}}
        )


def test_helm_launcher_renders_values_and_commands(tmp_path: Path) -> None:
    app = resolve_app(SPEC)
    calls: list[list[str]] = []
    launcher = HelmLauncher(
        tmp_path,
        namespace="streams",
        image="registry.local/ps:1.2",
        runner=lambda c: calls.append(list(c)) or "",
    )
    request: DeploymentRequest = app.deployment_request({"bootstrap_servers": "kafka:9092"}, {}, workers=3)
    first = launcher.ensure(request)
    assert first.action == "started"
    values = yaml.safe_load((tmp_path / "shop" / "values.yaml").read_text())
    assert values["replicaCount"] == 3
    assert values["image"] == {"repository": "registry.local/ps", "tag": "1.2"}
    assert values["app"]["factory"] == "platform_streams.apps:plugin_topology"
    assert values["app"]["config"]["bootstrap_servers"] == "kafka:9092"
    assert {e["name"] for e in values["extraEnv"]} == {"PLATFORM_STREAMS_APP", "PLATFORM_STREAMS_APP_CONFIG"}
    assert values["podAnnotations"]["platform-streams.io/fingerprint"] == app.fingerprint
    assert calls[0][:4] == ["helm", "upgrade", "--install", "shop"] and "streams" in calls[0]
    assert launcher.ensure(request).action == "unchanged" and len(calls) == 1
    schema_path = Path(__file__).resolve().parents[2] / "helm" / "platform-streams" / "values.schema.json"
    jsonschema = pytest.importorskip("jsonschema")
    if schema_path.exists():  # Helm validates the chart defaults overlaid with these values
        import json

        defaults = yaml.safe_load(schema_path.with_name("values.yaml").read_text())
        jsonschema.validate(_overlay(defaults, values), json.loads(schema_path.read_text()))


def _overlay(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: _overlay(base.get(k), v) for k, v in over.items()}}
    return over


def test_build_streams_defs_of_one_app_matches_the_factory() -> None:
    one = _graph(build_stream_app_defs(SPEC)).get_all_asset_keys()
    many = _graph(build_streams_defs([SPEC])).get_all_asset_keys()
    assert set(one) == set(many)


def test_without_a_broker_the_location_loads_and_the_sensor_says_so_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Settings are read when the sensor ticks, not at import: the variable set after the
    code location was built is the one used; an unreachable broker is one skip message."""
    from dagster_defs.resources import default_resources
    from platform_streams.config.sources import BOOTSTRAP_ENV
    from platform_streams.dev.brokers import find_free_port

    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    monkeypatch.delenv("PLATFORM_STREAMS_BOOTSTRAP", raising=False)
    defs = build_defs(APPS_DIR)  # no broker, no variable: it loads
    dg.Definitions.validate_loadable(defs)
    dead = f"127.0.0.1:{find_free_port()}"
    monkeypatch.setenv(BOOTSTRAP_ENV, dead)
    monkeypatch.setenv("PLATFORM_STREAMS_DEPLOY_DIR", str(tmp_path))
    resources = default_resources()
    sensor = defs.resolve_sensor_def("orders_app_health")
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, dg.SkipReason), result
    assert result.skip_message is not None and f"Kafka is unreachable at '{dead}'" in result.skip_message
    assert resources["streams_deployment"].deploy_root == tmp_path


def test_every_variable_the_code_location_reads_is_accepted_by_the_workers_it_starts() -> None:
    """The local launcher starts workers with the code location's environment, and a worker
    refuses a ``PLATFORM_STREAMS_*`` variable that is neither a setting nor a known other
    part's (exit status 2). ``PLATFORM_STREAMS_GRAFANA_URL``, read here and set as the README
    says, made every worker exit while starting."""
    from dagster_defs.resources import ENV_FALLBACKS
    from platform_streams.config import StreamsConfig
    from platform_streams.config.sources import BOOTSTRAP_ENV

    env = {name: "x" for name in ENV_FALLBACKS.values()}
    env |= {BOOTSTRAP_ENV: "kafka-0:9092", "PLATFORM_STREAMS_APPLICATION_ID": "app"}
    assert StreamsConfig.load(None, env=env).application_id == "app"
