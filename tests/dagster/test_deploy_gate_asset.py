"""The deploy gate in Dagster on the real broker: the app asset's materialization refuses a
topology change that renames a store's changelog, naming the store, unless its run config
allows it; a compatible change deploys; the ``deploy_gate`` asset check says the same.

The deployed application is the example plugin run by the local launcher's real worker
processes; they record the topology they run on the control topic, which is what the gate
reads. Renaming ``counts_store`` renames the store and its changelog (the deployed counts
would be orphaned); another ``big_order_amount`` changes a stateless filter only.
"""

from __future__ import annotations

import time
from typing import Any

import dagster as dg
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.deploy_gate import CHECK_NAME
from platform_streams.config import StreamsConfig
from platform_streams.ops.deployed_topology import read_deployed_topology
from tests.dagster.support import orders_spec

pytestmark = [pytest.mark.dagster, pytest.mark.broker, pytest.mark.apache_kafka]

KEY = dg.AssetKey(["orders_test"])


def _materialize(spec: dict[str, Any], resources: dict[str, Any], **config: Any) -> dg.ExecuteInProcessResult:
    defs = build_stream_app_defs(spec)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    run_config = {"ops": {"orders_test_deploy": {"config": config}}} if config else None
    return dg.materialize(
        assets, resources=resources, selection=[KEY], run_config=run_config, raise_on_error=False
    )


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    assert result.success
    [event] = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}  # type: ignore[union-attr]


def _check(spec: dict[str, Any], resources: dict[str, Any]) -> dg.AssetCheckEvaluation:
    defs = build_stream_app_defs(spec)
    [check] = [c for c in defs.asset_checks or [] if CHECK_NAME in {k.name for k in c.check_keys}]
    result = dg.materialize([check], resources=resources, selection=dg.AssetSelection.checks(check))
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


def _wait_recorded(bootstrap: str, app_id: str, fingerprint_not: str | None = None) -> str:
    """The workers write what they run when they start: wait for it (a new one after a roll)."""
    config = StreamsConfig(application_id=app_id, bootstrap_servers=bootstrap)
    deadline = time.monotonic() + 90
    while True:
        manifest = read_deployed_topology(config).manifest
        if manifest is not None and manifest["fingerprint"] != fingerprint_not:
            return str(manifest["fingerprint"])
        assert time.monotonic() < deadline, "the workers recorded no (new) topology"
        time.sleep(0.5)


def test_a_renamed_changelog_is_refused_by_the_materialization_a_compatible_change_deploys(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], bootstrap_servers: str
) -> None:
    started = time.monotonic()
    spec = orders_spec(orders_topics, app_id)
    first = _metadata(_materialize(spec, resources))
    assert first["action"] == "started" and first["deploy_gate_change"] == "compatible"
    deployed = _wait_recorded(bootstrap_servers, app_id)

    renamed = orders_spec(orders_topics, app_id)
    renamed["app_config"]["counts_store"] = "orders-per-customer-v2"
    refused = _materialize(renamed, resources)
    assert not refused.success
    [failure] = [e for e in refused.all_events if e.is_step_failure]
    message = str(failure.step_failure_data.error)
    assert "deploy refused" in message and "orders-per-customer" in message
    assert f"{app_id}-orders-per-customer-changelog" in message and "allow_incompatible" in message
    assert _wait_recorded(bootstrap_servers, app_id) == deployed  # the running workers were left alone

    check = _check(renamed, resources)
    assert not check.passed and check.severity is dg.AssetCheckSeverity.ERROR
    assert "orders-per-customer" in (check.description or "")
    assert _check(spec, resources).passed

    compatible = orders_spec(orders_topics, app_id)
    compatible["app_config"]["big_order_amount"] = 1000.0
    rolled = _metadata(_materialize(compatible, resources))
    # the threshold is inside a filter's function: the same stores and topics (same manifest)
    assert rolled["action"] == "rolled" and rolled["deploy_gate_change"] == "compatible"

    allowed = _metadata(_materialize(renamed, resources, allow_incompatible=True))
    assert allowed["action"] == "rolled" and allowed["deploy_gate_change"] == "incompatible"
    _wait_recorded(bootstrap_servers, app_id, fingerprint_not=deployed)  # the renamed store runs now
    print(f"deploy gate Dagster test: {time.monotonic() - started:.1f} s")
