"""The HTTP endpoint's key queries against one instance's real task (TopologyTestDriver):
running, restoring, or a standby; only the changelog end offsets (a broker call) are given.

Kafka Streams' ``StoreQueryParameters`` semantics (``StoreQueryIntegrationTest
#shouldQueryOnlyActivePartitionStoresByDefault`` / ``#shouldQuerySpecificStalePartitionStores``):
by default only a running active answers; a caller that accepts staleness (here: a bound
in records, ``max_lag``) also gets a standby or restoring copy, told how stale it is. Two
instances and the forwarding between them are the broker test
``tests/integration/test_iq_stale_reads.py``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from platform_streams.runtime.workers.worker import WorkerState
from platform_streams.server.routes import Api
from platform_streams.testing import TopologyTestDriver
from tests.unit.query.test_service_tasks import _service, driver

__all__ = ["driver"]  # the fixture, shared with the query tests

END = 8  # the changelog's end offset; the task applied none of it (lag 8)


def _api(driver: TopologyTestDriver, *, active: bool, state: WorkerState, ends: Any = None) -> Api:
    service, _ = _service(driver, active=active, state=state)

    def fetch(tps: Collection[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        if ends is not None:
            raise ends
        return dict.fromkeys(tps, END)

    service.fetch_changelog_ends = fetch
    return Api(SimpleNamespace(interactive_queries=service, config=driver.config, plan=driver.plan))  # type: ignore[arg-type]


def _get(api: Api, query: str = "") -> tuple[int, dict[str, str], dict[str, Any]]:
    response = api.handle("GET", f"/stores/counts/keys/alice{query}", None)
    return response.status, response.headers, orjson.loads(response.body)


def test_a_running_active_answers_fresh(driver: TopologyTestDriver) -> None:
    api = _api(driver, active=True, state=WorkerState.RUNNING)
    for query in ("", "?max_lag=0"):
        status, headers, body = _get(api, query)
        assert status == 200 and body["value"] == 3 and body["stale"] is False and body["lag"] == 0, body
        assert headers["X-Streams-Lag"] == "0"


def test_a_restoring_active_is_refused_by_default_naming_its_lag(driver: TopologyTestDriver) -> None:
    api = _api(driver, active=True, state=WorkerState.PARTITIONS_ASSIGNED)
    for query in ("", "?require_active=true&max_lag=100"):
        status, _, body = _get(api, query)
        assert status == 503 and body["reason"] == "restoring" and body["lag"] == END, body
        assert body["error"] == (
            "partition 0 of store 'counts': its active task on me:7070 is restoring, 8 records behind; "
            "pass max_lag=<records> to accept a standby or the restoring copy"
        )
    status, _, body = _get(api, "?local=true")  # what another instance that forwarded reads
    assert status == 503 and body["reason"] == "restoring" and body["lag"] == END, body


def test_a_restoring_active_answers_within_the_bound_saying_how_stale(driver: TopologyTestDriver) -> None:
    api = _api(driver, active=True, state=WorkerState.PARTITIONS_ASSIGNED)
    status, headers, body = _get(api, f"?max_lag={END}")
    assert status == 200 and body["value"] == 3 and body["stale"] is True and body["lag"] == END, body
    assert headers["X-Streams-Lag"] == str(END) and body["position"] == {}
    status, _, body = _get(api, f"?max_lag={END - 1}")
    assert status == 503 and body["reason"] == "restoring" and f"within max_lag={END - 1}" in body["error"]
    status, _, body = _get(api, f"?max_lag={END - 1}&local=true")
    assert status == 503 and body["reason"] == "lag" and body["lag"] == END, body


def test_a_standby_answers_only_within_the_bound(driver: TopologyTestDriver) -> None:
    api = _api(driver, active=False, state=WorkerState.RUNNING)
    status, _, body = _get(api)
    assert status == 503 and "reason" not in body and "max_lag" in body["error"], body
    status, headers, body = _get(api, f"?max_lag={END}")
    assert status == 200 and body["value"] == 3 and body["stale"] is True and body["lag"] == END, body
    assert headers["X-Streams-Lag"] == str(END)
    status, _, body = _get(api, f"?max_lag={END - 1}&local=true")
    assert status == 503 and body["reason"] == "lag" and body["lag"] == END, body


def test_a_copy_whose_lag_is_unknown_never_answers_a_bounded_query(driver: TopologyTestDriver) -> None:
    api = _api(driver, active=True, state=WorkerState.PARTITIONS_ASSIGNED, ends=TimeoutError("no end"))
    status, _, body = _get(api, "?max_lag=1000000")
    assert status == 503 and body["reason"] == "restoring" and body["lag"] is None, body
    assert "restoring (how far behind is not known yet)" in body["error"]


@pytest.mark.parametrize("query", ["?max_lag=x", "?max_lag=-1", "?max_staleness_ms=10"])
def test_bad_staleness_parameters_are_a_400(driver: TopologyTestDriver, query: str) -> None:
    status, _, body = _get(_api(driver, active=True, state=WorkerState.RUNNING), query)
    assert status == 400 and ("max_lag" in body["error"] or "max_staleness_ms" in body["error"]), body
