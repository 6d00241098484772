"""Helpers of the Dagster suite."""

from __future__ import annotations

from typing import Any

from tests.support.kafka import GROUP_TIMING

PARTITIONS = 2


def orders_spec(topics: dict[str, str], app_id: str, **extra: Any) -> dict[str, Any]:
    """A StreamAppSpec of the example plugin on ``topics`` (keys: the plugin's *_topic fields)."""
    dlq = topics.get("dlq")
    streams: dict[str, Any] = {
        "application_id": app_id,
        "commit_interval_ms": 200,
        "poll_ms": 50,
        "consumer_config": {"fetch.wait.max.ms": 10},
        **{k.replace(".", "_"): v for k, v in GROUP_TIMING.items()},
    }
    if dlq:
        streams["errors_dead_letter_queue_topic_name"] = dlq
    app_config = {k: v for k, v in topics.items() if k != "dlq"}
    return {"name": "orders_test", "app": "orders", "app_config": app_config, "streams": streams, **extra}
