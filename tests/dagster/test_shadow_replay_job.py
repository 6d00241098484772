"""The ``<app>_shadow_replay`` job on the real local Spark and a real broker: the example app's
last hour of input replayed with a candidate configuration of its plugin. A candidate whose
big-order filter (one operator) has another threshold fails the asset check, naming exactly
the orders the two thresholds treat differently; the unchanged candidate passes."""

from __future__ import annotations

from typing import Any

import dagster as dg
import orjson
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.shadow_replay import CHECK_NAME
from platform_streams.kafka import KafkaAdmin
from tests.dagster.support import orders_spec
from tests.support.kafka import produce

# kafka_side: Spark is a JVM of its own; the Tansu copy runs in the Kafka-side process too
pytestmark = [
    pytest.mark.spark,
    pytest.mark.dagster,
    pytest.mark.broker,
    pytest.mark.apache_kafka,
    pytest.mark.kafka_side,
]

#: orders of 7 customers, amounts 0, 25, ..., 225 (the app's threshold: 100)
ORDERS = [
    (f"o-{i}", orjson.dumps({"order_id": f"o-{i}", "customer": f"c-{i % 7}", "amount": 25.0 * (i % 10)}))
    for i in range(30)
]


def _ops(config: dict[str, Any]) -> dict[str, Any]:
    return {"ops": {"orders_test_shadow_replay_asset": {"config": config}}}


def _run(defs: dg.Definitions, candidate: dict[str, Any]) -> tuple[dg.AssetCheckEvaluation, dict[str, Any]]:
    job = defs.resolve_job_def("orders_test_shadow_replay")
    config = {"candidate_app_config": candidate}  # over the default range: the last hour
    result = job.execute_in_process(run_config=_ops(config))
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    (materialization,) = result.asset_materializations_for_node("orders_test_shadow_replay_asset")
    return evaluation, {k: v.value for k, v in materialization.metadata.items()}


@pytest.mark.timeout(900)  # four Spark backfills; the first also starts Spark
@pytest.mark.usefixtures("spark_job_session")
def test_shadow_replay_job_catches_a_changed_filter_and_passes_the_same_one(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], bootstrap_servers: str
) -> None:
    produce(bootstrap_servers, orders_topics["orders_topic"], ORDERS)  # stamped now: in the last hour
    spec = orders_spec(orders_topics, app_id)
    spec["streams"]["statestore_cache_max_bytes"] = 0
    defs = dg.Definitions.merge(build_stream_app_defs(spec), dg.Definitions(resources=resources))

    changed, meta = _run(defs, {"big_order_amount": 150.0})
    assert changed.check_name == CHECK_NAME
    assert changed.asset_key == dg.AssetKey(["orders_test", "shadow_replay"])
    assert not changed.passed
    expected = {key for key, value in ORDERS if orjson.loads(value)["amount"] in (100.0, 125.0)}
    big = orders_topics["big_orders_topic"]
    assert {(k["topic"], k["key"]) for k in meta["first_differing_keys"]} == {(big, k) for k in expected}
    assert all(k["candidate"] == 0 and k["baseline"] == 1 for k in meta["first_differing_keys"])
    assert meta["differing_keys"] == len(expected) and meta["input_records"] == len(ORDERS)
    assert meta["verdict"].startswith("FAIL") and changed.description == meta["verdict"]

    same, meta = _run(defs, {"big_order_amount": 100.0})
    assert same.passed, meta["summary"]
    assert meta["differing_keys"] == 0 and meta["keys_compared"] > len(ORDERS)


def test_a_bad_candidate_config_fails_the_run_naming_the_field(
    orders_topics: dict[str, str], app_id: str, resources: dict[str, Any], admin: KafkaAdmin
) -> None:
    defs = dg.Definitions.merge(
        build_stream_app_defs(orders_spec(orders_topics, app_id)), dg.Definitions(resources=resources)
    )
    job = defs.resolve_job_def("orders_test_shadow_replay")
    config = {"candidate_app_config": {"big_order_amount": -1}}
    with pytest.raises(dg.Failure, match=r"candidate_app_config: .*big_order_amount"):
        job.execute_in_process(run_config=_ops(config))
