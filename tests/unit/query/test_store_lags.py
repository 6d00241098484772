"""Store partition lags (Kafka's ``LagInfo`` / ``allLocalStorePartitionLags``) and the HTTP
endpoint's staleness bound, without a broker.

``LagInfo`` follows Kafka Streams' ``LagInfo`` (``offsetLag = max(0, end - current)``); the
per-role positions follow ``KafkaStreams#allLocalStorePartitionLags``: a running active task
reports its changelog's end offset as its position (``Task.LATEST_OFFSET``), a restoring one
or a standby the next offset it would apply, 0 when it applied nothing
(``LagFetchIntegrationTest#shouldFetchLagsDuringRestoration``: ``(0, 5, 5)`` at restore start).
The tasks here are real (built by the TopologyTestDriver); only the changelog end offsets,
a broker call, are given.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import orjson
import pytest

from platform_streams import KafkaStreams
from platform_streams.dsl import Consumed, Materialized, StreamsBuilder
from platform_streams.query import LagInfo
from platform_streams.query.lags import Role, StoreReplica, by_store, lags_of, replicas_of
from platform_streams.runtime.workers.worker import WorkerState
from platform_streams.serde import String
from platform_streams.server.forwarding import _refusal
from platform_streams.server.key_routing import max_lag_of
from platform_streams.testing import TopologyTestDriver
from tests.unit.query.test_service_tasks import _service, driver

__all__ = ["driver"]  # the fixture, shared with the neighbouring query tests

TP = ("app-counts-changelog", 3)


def test_lag_info_is_never_negative() -> None:
    assert LagInfo(5, 5).offset_lag == 0
    assert LagInfo(0, 5).offset_lag == 5
    assert LagInfo(7, 5).offset_lag == 0  # an end offset read before the copy's last apply
    assert LagInfo(2, 9).to_dict() == {
        "current_offset_position": 2,
        "end_offset_position": 9,
        "offset_lag": 7,
    }


def test_positions_per_role() -> None:
    changelogs = {"counts": TP[0]}
    applied = {TP: 41}  # the last offset applied: the copy reflects 0..41, next is 42
    (running,) = replicas_of(3, changelogs, applied, Role.ACTIVE, {TP: 99})
    (restoring,) = replicas_of(3, changelogs, applied, Role.RESTORING, {TP: 99})
    (standby,) = replicas_of(3, changelogs, {}, Role.STANDBY, {TP: 99})
    assert running.position is None and running.known_end is None
    assert restoring.position == 42 and restoring.known_end == 99  # its restore read the end
    assert standby.position == 0 and standby.known_end is None  # a standby's end is fetched


def test_lags_fetch_only_unknown_ends_and_leave_out_what_cannot_be_known() -> None:
    asked: list[set[tuple[str, int]]] = []

    def ends(tps: Collection[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        asked.append(set(tps))
        return {tp: 50 for tp in tps if tp[1] != 2}

    replicas = [
        StoreReplica("counts", 0, Role.ACTIVE, ("c", 0), None),
        StoreReplica("counts", 1, Role.RESTORING, ("c", 1), 10, known_end=30),
        StoreReplica("counts", 2, Role.STANDBY, ("c", 2), 5),
        StoreReplica("other", 0, Role.STANDBY, ("o", 0), 49),
    ]
    lags = lags_of(replicas, ends)
    assert asked == [{("c", 0), ("c", 2), ("o", 0)}]
    assert by_store(lags) == {
        "counts": {0: LagInfo(50, 50), 1: LagInfo(10, 30)},
        "other": {0: LagInfo(49, 50)},
    }

    def broken(tps: Collection[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        raise TimeoutError("no end offsets")

    assert by_store(lags_of(replicas, broken)) == {"counts": {1: LagInfo(10, 30)}}


@pytest.mark.parametrize(
    ("state", "active", "role", "lag"),
    [
        (WorkerState.RUNNING, True, Role.ACTIVE, LagInfo(8, 8)),
        (WorkerState.PARTITIONS_ASSIGNED, True, Role.RESTORING, LagInfo(0, 8)),
        (WorkerState.RUNNING, False, Role.STANDBY, LagInfo(0, 8)),
    ],
)
def test_local_lags_of_real_tasks_by_role(
    driver: TopologyTestDriver, state: WorkerState, active: bool, role: Role, lag: LagInfo
) -> None:
    service, _ = _service(driver, active=active, state=state)
    fetched: list[Collection[tuple[str, int]]] = []

    def ends(tps: Collection[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        fetched.append(tps)
        return dict.fromkeys(tps, 8)

    service.fetch_changelog_ends = ends
    (copy,) = service.local_lags("counts", 0)
    assert copy.role is role and copy.lag == lag and copy.replica.changelog[0].endswith("counts-changelog")
    assert service.local_lags("counts", 1) == []  # a partition not held here
    assert len(fetched) == 1


def test_a_restoring_task_uses_the_end_its_restore_read(driver: TopologyTestDriver) -> None:
    service, _ = _service(driver, active=True, state=WorkerState.PARTITIONS_ASSIGNED)
    service.fetch_changelog_ends = lambda tps: pytest.fail(f"asked the broker for {tps}")
    changelog = next(iter(service.local_replicas("counts", 0))).changelog
    service._restore_ends[changelog] = 12  # what the restore listener's on_log_end records
    (copy,) = service.local_lags("counts", 0)
    assert copy.role is Role.RESTORING and copy.lag == LagInfo(0, 12)


@pytest.mark.parametrize(
    ("params", "bound"),
    [
        ({}, None),
        ({"max_lag": "0"}, 0),
        ({"max_lag": "25"}, 25),
        ({"max_lag": "9", "require_active": "true"}, None),
    ],
)
def test_max_lag(params: dict[str, str], bound: int | None) -> None:
    assert max_lag_of(params) == bound


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"max_lag": "1x"}, "max_lag"),
        ({"max_lag": "-1"}, "max_lag"),
        ({"max_lag": "1_0"}, "max_lag"),
        ({"max_staleness_ms": "100"}, "max_staleness_ms"),
    ],
)
def test_bad_max_lag_names_the_parameter(params: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        max_lag_of(params)


def test_only_typed_fields_of_another_instances_refusal_are_read() -> None:
    def body(document: object) -> bytes:
        return orjson.dumps(document)

    assert _refusal(body({"error": "x", "reason": "restoring", "lag": 7})) == ("restoring", 7)
    assert _refusal(body({"reason": "lag", "lag": 3})) == ("lag", 3)
    assert _refusal(body({"reason": "restoring", "lag": "7"})) == ("restoring", None)
    assert _refusal(body({"reason": "restoring", "lag": True})) == ("restoring", None)
    assert _refusal(body({"reason": "something else", "lag": 7})) == (None, None)
    assert _refusal(b"<html>proxy error</html>") == (None, None)
    assert _refusal(body(["restoring"])) == (None, None)


@pytest.mark.parametrize("stateful", [False, True])
def test_no_lags_before_start_or_without_stores(tmp_path: Path, stateful: bool) -> None:
    """Kafka's ``KafkaStreamsTest#shouldReturnEmptyLocalStorePartitionLags`` and the "empty
    lag map before streams is started" checks of ``LagFetchIntegrationTest``."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=String(), value_serde=String()))
    if stateful:
        stream.group_by_key().count(materialized=Materialized.as_("counts"))
    else:
        stream.to("out")
    config = {"application_id": "lags", "bootstrap_servers": "127.0.0.1:1", "state_dir": tmp_path}
    streams = KafkaStreams(builder.build(), config)
    assert streams.all_local_store_partition_lags() == {}
