"""Asset checks and operations jobs on the real broker (no workers needed): the lag check
fails above its threshold, the reset job runs dry and for real, the compaction job runs
Spark over a store's changelog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.spec import resolve_app
from platform_streams.kafka import KafkaAdmin, TopicSpec
from tests.dagster.support import PARTITIONS, orders_spec
from tests.support.kafka import produce

pytestmark = [pytest.mark.dagster, pytest.mark.broker]


def _bound(defs: dg.Definitions, resources: dict[str, Any]) -> dg.Definitions:
    return dg.Definitions.merge(defs, dg.Definitions(resources=resources))


def _orders(count: int) -> list[tuple[str, bytes]]:
    return [(f"o-{i}", orjson.dumps({"customer": f"c-{i % 3}", "amount": 10.0})) for i in range(count)]


def _check(defs: dg.Definitions, resources: dict[str, Any], name: str) -> dg.AssetCheckEvaluation:
    key = dg.AssetCheckKey(dg.AssetKey(["orders_test"]), name)
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(
        [*assets, *(defs.asset_checks or [])],  # type: ignore[list-item]
        resources=resources,
        selection=dg.AssetSelection.checks(key),
        raise_on_error=False,
    )
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


def test_lag_check_fails_above_threshold_and_passes_below(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], bootstrap_servers: str
) -> None:
    produce(bootstrap_servers, orders_topics["orders_topic"], _orders(30))
    strict = build_stream_app_defs(orders_spec(orders_topics, app_id, max_lag=10))
    failed = _check(strict, resources, "consumer_lag")
    assert not failed.passed
    assert failed.metadata["total_lag"].value == 30  # nothing consumed yet: everything is lag
    assert failed.metadata["max_lag"].value == 10

    lenient = build_stream_app_defs(orders_spec(orders_topics, app_id, max_lag=100))
    assert _check(lenient, resources, "consumer_lag").passed
    # Not deployed: the workers check fails and says why.
    workers = _check(lenient, resources, "workers_running")
    assert not workers.passed and "not deployed" in (workers.description or "")


def test_reset_job_dry_run_then_real(
    orders_topics: dict[str, str],
    app_id: str,
    resources: dict[str, Any],
    admin: KafkaAdmin,
    bootstrap_servers: str,
) -> None:
    produce(bootstrap_servers, orders_topics["orders_topic"], _orders(8))
    app = resolve_app(orders_spec(orders_topics, app_id))
    repartition = f"{app_id}-orders-by-customer-repartition"
    admin.create_topics([TopicSpec(repartition, PARTITIONS)])
    defs = _bound(build_stream_app_defs(app), resources)
    job = defs.resolve_job_def("orders_test_reset")

    dry = job.execute_in_process(run_config={"ops": {"orders_test_reset_op": {"config": {}}}})
    assert dry.success
    data = dry.output_for_node("orders_test_reset_op")
    assert data["dry_run"] is True and data["ok"] is True
    assert repartition in [t["topic"] for t in data["internal_topics"] if t["status"] == "would_delete"]
    assert repartition in admin.list_topics()  # a dry run changes nothing

    real = job.execute_in_process(
        run_config={"ops": {"orders_test_reset_op": {"config": {"dry_run": False, "scenario": "to-latest"}}}}
    )
    assert real.success
    done = real.output_for_node("orders_test_reset_op")
    assert done["dry_run"] is False and done["scenario"] == "to-latest"
    assert repartition not in admin.list_topics()
    committed = admin.committed_offsets(
        app_id, [(orders_topics["orders_topic"], p) for p in range(PARTITIONS)]
    )
    assert sum(o or 0 for o in committed.values()) == 8

    # A wrong value is refused before the run, naming the field.
    with pytest.raises(dg.DagsterInvalidConfigError, match="scenario"):
        job.execute_in_process(
            run_config={"ops": {"orders_test_reset_op": {"config": {"scenario": "to-nowhere"}}}}
        )


@pytest.mark.usefixtures("spark_job_session")
def test_compaction_job_writes_snapshots(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], admin: KafkaAdmin,
    bootstrap_servers: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    app = resolve_app(orders_spec(orders_topics, app_id))
    changelog = f"{app_id}-orders-per-customer-changelog"
    admin.create_topics([TopicSpec(changelog, PARTITIONS)])
    records = [(f"c-{i % 4}".encode(), str(i).encode(), i % PARTITIONS) for i in range(12)]
    produce(bootstrap_servers, changelog, records)
    defs = _bound(build_stream_app_defs(app), resources)
    snapshots = tmp_path / "snapshots"
    result = defs.resolve_job_def("orders_test_compact_store").execute_in_process(
        run_config={
            "ops": {
                "orders_test_compact_store_op": {
                    "config": {"store": "orders-per-customer", "snapshots": str(snapshots), "parquet": False}
                }
            }
        }
    )
    assert result.success
    data = result.output_for_node("orders_test_compact_store_op")
    assert data["changelog_topic"] == changelog
    assert data["offsets_read"] == 12
    assert data["live_keys"] == 4  # the latest value of each of the 4 keys
    assert data["snapshots"] == PARTITIONS
    assert any(snapshots.rglob("*")), "no snapshot files written"
