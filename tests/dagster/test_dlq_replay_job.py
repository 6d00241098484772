"""The dead-letter replay job and the dead-letter check's counts by error class, on the real
broker: a dry run sends nothing, the real run re-injects each dead letter into its source topic
once, a second run sends nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import pytest

from dagster_defs import build_stream_app_defs
from dagster_defs.spec import resolve_app
from platform_streams.ops.dead_letter_replay import HEADER_REPLAY_SOURCE
from platform_streams.processor.exception_handlers import (
    HEADER_EXCEPTION,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_TOPIC,
)
from tests.dagster.support import orders_spec
from tests.support.kafka import consume_all, produce

pytestmark = [pytest.mark.dagster, pytest.mark.broker]


def _dead_letters(bootstrap: str, dlq: str, source: str) -> None:
    for i, cls in enumerate(["KeyError", "KeyError", "KeyError", "DeserializationError"]):
        headers = [
            (HEADER_EXCEPTION, cls.encode()),
            (HEADER_TOPIC, source.encode()),
            (HEADER_PARTITION, str(i % 2).encode()),
            (HEADER_OFFSET, str(100 + i).encode()),
        ]
        value = orjson.dumps({"customer": f"c-{i}", "amount": 1.0})
        produce(bootstrap, dlq, [(f"o-{i}", value)], headers=headers)


def _run(job: dg.JobDefinition, config: dict[str, Any]) -> dict[str, Any]:
    result = job.execute_in_process(run_config={"ops": {"orders_test_dlq_replay_op": {"config": config}}})
    assert result.success
    data: dict[str, Any] = result.output_for_node("orders_test_dlq_replay_op")
    return data


def test_dlq_replay_job_dry_then_real_and_the_check_counts_by_error_class(
    orders_topics: dict[str, str],
    app_id: str,
    resources: dict[str, Any],
    bootstrap_servers: str,
    tmp_path: Path,
) -> None:
    source, dlq = orders_topics["orders_topic"], orders_topics["dlq"]
    _dead_letters(bootstrap_servers, dlq, source)
    app = resolve_app(orders_spec(orders_topics, app_id))
    defs = dg.Definitions.merge(build_stream_app_defs(app), dg.Definitions(resources=resources))
    job = defs.resolve_job_def("orders_test_dlq_replay")

    dry = _run(job, {"error_classes": ["KeyError"]})
    assert (dry["dry_run"], dry["replayed"], dry["sent"]) == (True, 3, {"KeyError": {source: 3}})
    assert consume_all(bootstrap_servers, source, 1, timeout_s=2) == []
    future = _run(job, {"since": "2999-01-01T00:00:00Z"})  # a time range: the records' timestamps
    assert (future["replayed"], future["skipped"]) == (0, {"filtered": 4})
    past = _run(job, {"until": "2999-01-01T00:00:00Z", "error_classes": ["DeserializationError"]})
    assert past["sent"] == {"DeserializationError": {source: 1}}

    done = _run(job, {"error_classes": ["KeyError"], "dry_run": False})
    assert (done["dry_run"], done["replayed"]) == (False, 3)
    replayed = consume_all(bootstrap_servers, source, 3, timeout_s=20, isolation="read_committed")
    assert sorted(dict(r.headers)[HEADER_REPLAY_SOURCE] for r in replayed) == [
        f"{source}:0:100".encode(), f"{source}:0:102".encode(), f"{source}:1:101".encode()
    ]  # fmt: skip
    assert _run(job, {"error_classes": ["KeyError"], "dry_run": False})["replayed"] == 0

    key = dg.AssetCheckKey(dg.AssetKey(["orders_test"]), "dead_letter_not_growing")
    assets = [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]
    checked = dg.materialize(
        [*assets, *(defs.asset_checks or [])],  # type: ignore[list-item]
        resources=resources,
        selection=dg.AssetSelection.checks(key),
        raise_on_error=False,
    )
    [evaluation] = checked.get_asset_check_evaluations()
    assert evaluation.metadata["by_error_class"].value == {"KeyError": 3, "DeserializationError": 1}
