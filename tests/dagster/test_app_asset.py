"""The app asset on the real broker: materializing deploys real workers, a second
materialization with nothing changed is a no-op, a changed topology restarts them; the
sensor observes them and reports check results."""

from __future__ import annotations

import time
from typing import Any

import dagster as dg
import orjson
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.deploy.worker_client import WorkerClient
from tests.dagster.support import orders_spec
from tests.support.kafka import consume_all, produce

pytestmark = [pytest.mark.dagster, pytest.mark.broker]


def _orders(start: int, count: int, amount: float) -> list[tuple[str, bytes]]:
    return [
        (f"o-{i}", orjson.dumps({"order_id": f"o-{i}", "customer": f"c-{i % 5}", "amount": amount}))
        for i in range(start, start + count)
    ]


def _materialize(defs: dg.Definitions, resources: dict[str, Any]) -> dict[str, Any]:
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(assets, resources=resources, selection=[dg.AssetKey(["orders_test"])])
    assert result.success
    [event] = result.get_asset_materialization_events()
    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
    return {k: v.value for k, v in materialization.metadata.items()}


def test_materialize_deploys_then_noop_then_rolls(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], bootstrap_servers: str
) -> None:
    defs = build_stream_app_defs(orders_spec(orders_topics, app_id))
    first = _materialize(defs, resources)
    assert first["action"] == "started"
    assert len(first["worker_pids"]) == 1 and first["worker_endpoints"]

    # Real workers process real records.
    produce(bootstrap_servers, orders_topics["orders_topic"], _orders(0, 20, 150.0))
    big = consume_all(bootstrap_servers, orders_topics["big_orders_topic"], 20, timeout_s=60)
    assert len(big) == 20
    assert {orjson.loads(r.value or b"{}")["tier"] for r in big} == {"big"}

    again = _materialize(defs, resources)
    assert again["action"] == "unchanged"
    assert again["worker_pids"] == first["worker_pids"]
    assert again["fingerprint"] == first["fingerprint"]

    # The sensor: observations of the app and its output topics, and every check's result.
    sensor = dg.Definitions.merge(defs, dg.Definitions(resources=resources)).resolve_sensor_def(
        "orders_test_health"
    )
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, dg.SensorResult)
    observations = [e for e in result.asset_events or [] if isinstance(e, dg.AssetObservation)]
    checks = {e.check_name: e for e in result.asset_events or [] if isinstance(e, dg.AssetCheckEvaluation)}
    app_obs = next(o for o in observations if o.asset_key == dg.AssetKey(["orders_test"]))
    assert app_obs.metadata["workers_alive"].value == 1
    assert app_obs.metadata["processed_total"].value >= 20
    topic_obs = {
        o.asset_key.path[-1]: o.metadata["records"].value
        for o in observations
        if o.asset_key.path[0] == "kafka"
    }
    assert topic_obs[orders_topics["big_orders_topic"].replace("-", "_")] == 20
    assert checks["workers_running"].passed, checks["workers_running"].description
    assert checks["internal_topics_valid"].passed, checks["internal_topics_valid"].description
    assert set(checks) == {
        "workers_running",
        "consumer_lag",
        "dead_letter_not_growing",
        "internal_topics_valid",
    }
    assert not result.run_requests
    _second_tick_charts_numbers(sensor, resources, result.cursor, orders_topics, bootstrap_servers)

    # A changed topology (another threshold) gets a new fingerprint: the workers are replaced.
    changed = orders_spec({**orders_topics}, app_id)
    changed["app_config"]["big_order_amount"] = 1000.0
    rolled = _materialize(build_stream_app_defs(changed), resources)
    assert rolled["action"] == "rolled"
    assert rolled["fingerprint"] != first["fingerprint"]
    assert set(rolled["worker_pids"]).isdisjoint(first["worker_pids"])
    produce(
        bootstrap_servers, orders_topics["orders_topic"], _orders(100, 10, 150.0) + _orders(200, 5, 2000.0)
    )
    # the new workers join the group (after the old ones left) before they process
    # (30 orders before the roll: 20, then 10 more for the sensor's second tick)
    by_customer = consume_all(bootstrap_servers, orders_topics["by_customer_topic"], 45, timeout_s=60)
    assert len(by_customer) == 45  # the new workers process on from the committed offsets
    big = consume_all(bootstrap_servers, orders_topics["big_orders_topic"], 35, timeout_s=30)
    assert len(big) == 35  # only the 5 orders above the new threshold were added
    state = WorkerClient(rolled["worker_endpoints"][0]).state()
    assert state["state"] == "RUNNING"


def _second_tick_charts_numbers(
    sensor: dg.SensorDefinition,
    resources: dict[str, Any],
    cursor: str | None,
    topics: dict[str, str],
    bootstrap_servers: str,
) -> None:
    """A tick after more records: numeric observations on the app, topic and store assets,
    topic data versions (end offsets), and links to the workers."""
    produce(bootstrap_servers, topics["orders_topic"], _orders(20, 10, 150.0))
    assert len(consume_all(bootstrap_servers, topics["big_orders_topic"], 30, timeout_s=60)) == 30
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor))
    assert isinstance(result, dg.SensorResult)
    observed = {
        o.asset_key.to_user_string(): o
        for o in result.asset_events or []
        if isinstance(o, dg.AssetObservation)
    }
    app = {k: v.value for k, v in observed["orders_test"].metadata.items()}
    assert app["records_in_per_s"] > 0 and app["records_out_per_s"] > 0, app
    assert app["e2e_latency_p99_ms"] is not None and app["e2e_latency_p99_ms"] > 0, app
    assert app["consumer_lag"] >= 0 and app["dead_letter_records"] == 0 and app["restored_records"] >= 0
    assert [k for k in app if k.startswith("endpoint ")], app
    assert isinstance(observed["orders_test"].metadata[next(k for k in app if k.startswith("endpoint "))],
                      dg.UrlMetadataValue)  # fmt: skip
    big = observed["kafka/" + topics["big_orders_topic"].replace("-", "_")]
    assert big.metadata["records"].value == 30 and big.tags["dagster/data_version"] == "30"
    assert big.metadata["records_per_s"].value > 0
    store = observed["orders_test/stores/orders_per_customer"]
    assert store.metadata["entries"].value >= 5  # five customers (RocksDB estimate-num-keys: an estimate)


def test_sensor_requests_rematerialization_when_workers_died(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any]
) -> None:
    import os
    import signal

    defs = build_stream_app_defs(orders_spec(orders_topics, app_id))
    first = _materialize(defs, resources)
    os.kill(first["worker_pids"][0], signal.SIGKILL)
    launcher = resources["streams_deployment"].launcher()
    deadline = time.monotonic() + 10
    while launcher.status("orders_test").alive and time.monotonic() < deadline:
        time.sleep(0.05)
    sensor = dg.Definitions.merge(defs, dg.Definitions(resources=resources)).resolve_sensor_def(
        "orders_test_health"
    )
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests or []
    assert request.asset_selection == [dg.AssetKey(["orders_test"])]
    checks = {e.check_name: e for e in result.asset_events or [] if isinstance(e, dg.AssetCheckEvaluation)}
    assert not checks["workers_running"].passed
    repaired = _materialize(defs, resources)
    assert repaired["action"] == "repaired"
