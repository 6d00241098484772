"""The chart sets the RocksDB memory budget from the worker container's memory limit.

``rocksdb.memoryBudgetFraction`` of ``resources.limits.memory`` becomes the worker's
``rocksdb_memory_budget`` (``PLATFORM_STREAMS_ROCKSDB_MEMORY_BUDGET``, bytes), which the
worker's own config validation then reads: the test loads a StreamsConfig from the rendered
environment as the pod would.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
import yaml

from platform_streams.config import StreamsConfig
from tests.helm.chart_support import CHART, render, worker_container

ENV = "PLATFORM_STREAMS_ROCKSDB_MEMORY_BUDGET"


def _budget(values: dict[str, Any]) -> str | None:
    env = {e["name"]: e.get("value") for e in worker_container(render(values)).get("env", [])}
    return env.get(ENV)


def _limit(memory: str) -> dict[str, Any]:
    return {"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": memory}}}


def test_the_default_values_show_the_limit_and_the_fraction_and_set_their_product() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["resources"]["limits"]["memory"] == "1Gi"
    assert values["rocksdb"]["memoryBudgetFraction"] == 0.5
    assert _budget({}) == str(512 * 1024 * 1024)


@pytest.mark.parametrize(
    ("memory", "fraction", "expected"),
    [
        ("2Gi", 0.5, 1 << 30),
        ("1536Mi", 0.25, 384 << 20),
        ("1G", 0.5, 500_000_000),
        ("800000000", 0.5, 400_000_000),
    ],
)
def test_the_budget_is_the_fraction_of_the_limit(memory: str, fraction: float, expected: int) -> None:
    budget = _budget({**_limit(memory), "rocksdb": {"memoryBudgetFraction": fraction}})
    assert budget == str(expected)
    config = StreamsConfig.from_env(
        {"PLATFORM_STREAMS_APPLICATION_ID": "a", "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": "k:9092", ENV: budget}
    )
    assert config.rocksdb_memory_budget == expected


def test_an_explicit_budget_wins_and_no_limit_means_no_budget() -> None:
    assert _budget({"rocksdb": {"memoryBudget": "300Mi"}}) == "300Mi"
    assert _budget({"resources": {"limits": {"memory": None}}}) is None  # null removes the default
    assert _budget({"rocksdb": {"memoryBudgetFraction": 0}}) is None


def test_a_fraction_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(helm.HelmError) as err:
        render({"rocksdb": {"memoryBudgetFraction": 1.5}})
    assert "memoryBudgetFraction" in str(err.value)
