"""The daily-partitioned Spark backfill job on the real local Spark: one partition's run reads
only that day of the input from the broker, and writes per key what the streaming app
produces for that day's records (the check of tests/spark/test_backfill.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.spec import resolve_app
from platform_streams.kafka import KafkaAdmin
from tests.dagster.support import PARTITIONS, orders_spec
from tests.integration.support_apps import log_ends, read_to_end, running_app, wait_committed, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.dagster, pytest.mark.broker]

DAY = "2025-03-10"
START_MS = int(datetime(2025, 3, 10, tzinfo=UTC).timestamp() * 1000)
END_MS = START_MS + 24 * 3600 * 1000
#: output topic fields of the example plugin's config
OUTPUTS = ("big_orders_topic", "by_customer_topic", "counts_topic")
#: every update of a count comes out (the backfill and the stream then emit the same counts)
NO_CACHE = {"statestore_cache_max_bytes": 0}

PerKey = dict[str, Counter[bytes]]


def _orders(prefix: str, count: int) -> list[tuple[str, bytes]]:
    """Orders of 7 customers, amounts from small to big to review."""
    return [
        (
            f"{prefix}-{i}",
            orjson.dumps({"order_id": f"{prefix}-{i}", "customer": f"c-{i % 7}", "amount": 25.0 * (i % 25)}),
        )
        for i in range(count)
    ]


def _per_key(pairs: Iterable[tuple[Any, Any]]) -> PerKey:
    out: dict[str, Counter[bytes]] = defaultdict(Counter)
    for key, value in pairs:
        out[bytes(key).decode()][bytes(value)] += 1
    return dict(out)


def _new_topics(admin: KafkaAdmin) -> dict[str, str]:
    return {
        "orders_topic": new_topic(admin, PARTITIONS, "orders"),
        **{field: new_topic(admin, PARTITIONS, field.split("_")[0]) for field in OUTPUTS},
    }


def _streamed(
    topics: dict[str, str], app_id: str, day: list[tuple[str, bytes]], bootstrap: str, admin: KafkaAdmin,
    state_dir: Path,
) -> dict[str, PerKey]:  # fmt: skip
    """What the streaming app (its real topology and settings, in process) outputs for ``day``."""
    app = resolve_app(_spec(topics, app_id))
    config = app.validated_settings({"bootstrap_servers": bootstrap, "state_dir": str(state_dir)})
    with running_app(app.topology, config):
        placed = produce(bootstrap, topics["orders_topic"], day, timestamp_ms=_in_window(len(day)))
        wait_committed(admin, app_id, log_ends(placed, topics["orders_topic"], PARTITIONS), "day processed")
        wait_until(
            lambda: len(consume_all(bootstrap, topics["counts_topic"], len(day), timeout_s=1)) >= len(day),
            30,
            "every count output",
        )
    return {
        field: _per_key((r.key, r.value) for r in read_to_end(bootstrap, topics[field], PARTITIONS))
        for field in OUTPUTS
    }


def _spec(topics: dict[str, str], app_id: str) -> dict[str, Any]:
    """The example app's spec on ``topics``, every count update emitted."""
    spec = orders_spec(topics, app_id)
    spec["streams"].update(NO_CACHE)
    return spec


def _in_window(count: int) -> list[int]:
    """From the first millisecond of the day on, one order a minute."""
    return [START_MS + i * 60_000 for i in range(count)]


@pytest.mark.usefixtures("spark_job_session")
def test_backfill_job_runs_one_day_of_input_like_the_streaming_app(
    orders_topics: dict[str, str],
    app_id: str,
    resources: dict[str, Any],
    admin: KafkaAdmin,
    bootstrap_servers: str,
    tmp_path: Path,
) -> None:
    day = _orders("o", 60)
    expected = _streamed(orders_topics, app_id, day, bootstrap_servers, admin, tmp_path / "state")
    assert sum(sum(c.values()) for c in expected["counts_topic"].values()) == len(day)

    # The backfilled app's input: the day before (to its last ms), the day, the day after (from
    # its first ms, the window's exclusive end), in time order as a producer would write them.
    topics = _new_topics(admin)
    before, after = _orders("before", 15), _orders("after", 15)
    source = topics["orders_topic"]
    produce(bootstrap_servers, source, before, timestamp_ms=[START_MS - 15 + i for i in range(15)])
    produce(bootstrap_servers, source, day, timestamp_ms=_in_window(len(day)))
    produce(bootstrap_servers, source, after, timestamp_ms=[END_MS + i for i in range(15)])

    defs = dg.Definitions.merge(
        build_stream_app_defs(_spec(topics, f"{app_id}-bf")), dg.Definitions(resources=resources)
    )
    job = defs.resolve_job_def("orders_test_backfill")
    result = job.execute_in_process(
        run_config={"ops": {"orders_test_backfill_op": {"config": {}}}}, partition_key=DAY
    )
    assert result.success
    data = result.output_for_node("orders_test_backfill_op")
    assert data["window"] == [START_MS, END_MS]
    root = resources["streams_deployment"].deploy_root.resolve()
    assert data["output"] == str(root / "orders_test" / "backfill" / DAY)
    expected_out = {topics[f]: sum(sum(c.values()) for c in expected[f].values()) for f in OUTPUTS}
    assert data["records_out"] == expected_out
    assert expected_out[topics["by_customer_topic"]] == len(day)  # only the day's orders

    rows = resources["spark"].session().read.parquet(data["output"]).collect()
    by_topic: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for row in rows:
        by_topic[row["topic"]].append((row["key"], row["value"]))
    for field in OUTPUTS:
        assert _per_key(by_topic[topics[field]]) == expected[field], field
