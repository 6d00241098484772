"""Interactive queries (IQv2) on a running client: results, positions and bounds, restarts, restoration."""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from platform_streams import KafkaStreams, State
from platform_streams.errors import InvalidStateStoreError
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor.partitioner import default_partition
from platform_streams.query import (
    FailureReason,
    HostInfo,
    KeyQuery,
    Position,
    PositionBound,
    RangeQuery,
    StateQueryRequest,
    StateQueryResult,
)
from platform_streams.query.position import read_position_file
from platform_streams.serde import String
from platform_streams.state import StateRestoreListener
from tests.integration.iq_apps import STORE, count_app, http_get
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = pytest.mark.broker

PARTITIONS = 4


def _records(keys: int) -> list[tuple[str, str]]:
    """Key ``k<i>`` appears ``i % 3 + 1`` times."""
    return [(f"k{i:05d}", "v") for i in range(keys) for _ in range(i % 3 + 1)]


def _all_rows(result: StateQueryResult) -> dict[str, int]:
    rows: dict[str, int] = {}
    for answer in result.partition_results.values():
        if answer.is_success():
            rows.update(answer.result)
    return rows


def _scan(streams: KafkaStreams, bound: PositionBound | None = None) -> StateQueryResult:
    request = StateQueryRequest.in_store(STORE).with_query(RangeQuery.with_no_bounds())
    return streams.query(request if bound is None else request.with_position_bound(bound))


def _last_offsets(topic: str, placed: list[tuple[int, int]]) -> Position:
    last: dict[tuple[str, int], int] = {}
    for partition, offset in placed:
        last[(topic, partition)] = max(offset, last.get((topic, partition), -1))
    return Position.from_partition_offsets(last)


def test_local_queries_positions_and_bounds(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, PARTITIONS, "in")
    records = _records(300)
    expected = dict(Counter(k for k, _ in records))
    placed = produce(bootstrap_servers, source, records)
    config = app_config(bootstrap_servers, tmp_path, http_port=0)
    with running_app(count_app(source), config) as streams:
        result = wait_until(lambda: _all_rows(r := _scan(streams)) == expected and r, 30, "every key counted")
        assert sorted(result.partition_results) == list(range(PARTITIONS))
        position = result.get_position()
        assert position == _last_offsets(source, placed)

        # the client knows its own assignment at RUNNING (no round trip through the topic)
        assert streams.http_server is not None
        meta = streams.query_metadata_for_key(STORE, "k00007")
        assert meta.active_host == streams.http_server.address and meta.standby_hosts == frozenset()
        assert meta.partition == default_partition(String().serialize("k00007") or b"", PARTITIONS)
        key_request = (
            StateQueryRequest.in_store(STORE)
            .with_query(KeyQuery.with_key("k00007"))
            .with_partitions({meta.partition})
            .enable_execution_info()
        )
        answer = streams.query(key_request).partition_results[meta.partition]
        assert answer.get_result() == expected["k00007"] and answer.execution_info

        at = PositionBound.at(position)
        assert (
            streams.query(key_request.with_position_bound(at).require_active())
            .partition_results[meta.partition]
            .is_success()
        )
        mine = position.get_partition_positions(source)[meta.partition]
        ahead = PositionBound.at(Position({source: {meta.partition: mine + 1}}))
        behind = streams.query(key_request.with_position_bound(ahead)).partition_results[meta.partition]
        assert behind.failure_reason is FailureReason.NOT_UP_TO_BOUND
        # the next record of that partition brings the store up to the bound
        produce(bootstrap_servers, source, [("k00007", "v")])

        def caught_up() -> bool:
            got = streams.query(key_request.with_position_bound(ahead)).partition_results[meta.partition]
            return got.is_success() and got.get_result() == expected["k00007"] + 1

        wait_until(caught_up, 20, "the store reached the bound")

        missing = streams.query(key_request.with_partitions({meta.partition, 9})).partition_results
        assert missing[9].failure_reason is FailureReason.DOES_NOT_EXIST
        prefix = StateQueryRequest.in_store(STORE).with_query(RangeQuery.with_prefix("k0000"))
        assert _all_rows(streams.query(prefix)) == {
            k: v for k, v in expected.items() if k.startswith("k0000")
        } | {"k00007": expected["k00007"] + 1}
        with pytest.raises(InvalidStateStoreError):
            streams.query(StateQueryRequest.in_store("nope").with_query(KeyQuery.with_key("x")))


def test_positions_survive_a_restart(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    source = new_topic(admin, PARTITIONS, "in")
    records = _records(100)
    expected = dict(Counter(k for k, _ in records))
    placed = produce(bootstrap_servers, source, records)
    config = app_config(bootstrap_servers, tmp_path)
    with running_app(count_app(source), config) as streams:
        wait_until(lambda: _all_rows(_scan(streams)) == expected, 30, "every key counted")
    position = _last_offsets(source, placed)
    task_dirs = sorted((tmp_path / config.application_id).glob("0_*"))
    assert len(task_dirs) == PARTITIONS
    merged = Position()
    for directory in task_dirs:
        merged = merged.merge(read_position_file(directory))
    assert merged == position  # written after the last commit, one file per task
    with running_app(count_app(source), config) as streams:
        # no new input: the bound is met from the persisted positions at once
        result = _scan(streams, PositionBound.at(position))
        assert all(r.is_success() for r in result.partition_results.values()), result
        assert _all_rows(result) == expected


class BlockingRestoreListener(StateRestoreListener):
    """Holds the first restored batch until the test lets it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches = 0

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num: int
    ) -> None:
        self.batches += 1
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(30)


def test_queries_during_restoration(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    source = new_topic(admin, PARTITIONS, "in")
    keys = 12_000  # ~3000 changelog records per partition: several restore batches of 1000
    records = [(f"k{i:05d}", "v") for i in range(keys)]
    placed = produce(bootstrap_servers, source, records)
    config = app_config(bootstrap_servers, tmp_path / "first")
    with running_app(count_app(source), config) as streams:
        wait_until(lambda: len(_all_rows(_scan(streams))) == keys, 30, "every key counted")
    position = _last_offsets(source, placed)

    # a fresh state directory: everything is restored from the changelog
    restoring = app_config(bootstrap_servers, tmp_path / "second", app_id=config.application_id, http_port=0)
    listener = BlockingRestoreListener()
    streams = KafkaStreams(count_app(source), restoring)
    streams.set_global_state_restore_listener(listener)
    try:
        streams.start()
        assert listener.entered.wait(30), "restoration did not start"
        assert streams.state() is State.REBALANCING
        stale = _scan(streams)
        assert sorted(stale.partition_results) == list(range(PARTITIONS))
        assert all(r.is_success() for r in stale.partition_results.values())
        assert len(_all_rows(stale)) < keys  # a partial view, not the final one
        assert stale.get_position().is_empty()  # ... which claims no position
        active = streams.query(
            StateQueryRequest.in_store(STORE).with_query(RangeQuery.with_no_bounds()).require_active()
        )
        assert {r.failure_reason for r in active.partition_results.values()} == {FailureReason.NOT_ACTIVE}
        bounded = _scan(streams, PositionBound.at(position))
        assert {r.failure_reason for r in bounded.partition_results.values()} == {
            FailureReason.NOT_UP_TO_BOUND
        }
        assert streams.http_server is not None
        status, _, body = http_get(f"http://{streams.http_server.address}/health/ready")
        assert status == 503 and body["restoring"]
        listener.release.set()
        streams.wait_for_state(State.RUNNING, timeout_s=30)
        assert listener.batches >= PARTITIONS
        # restored on an instance that never ran the tasks: positions come from the committed offsets
        done = _scan(streams, PositionBound.at(position))
        assert all(r.is_success() for r in done.partition_results.values()), done
        assert len(_all_rows(done)) == keys
        assert http_get(f"http://{streams.http_server.address}/health/ready")[0] == 200
        assert HostInfo.parse(str(streams.http_server.address)).port > 0
    finally:
        listener.release.set()
        assert streams.close(timeout_s=30)
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_standby_reads(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    """Two clients with one standby replica: each answers for the other's partitions from its standbys."""
    source = new_topic(admin, PARTITIONS, "in")
    records = _records(200)
    expected = dict(Counter(k for k, _ in records))
    produce(bootstrap_servers, source, records)
    # addresses only for the metadata (no HTTP endpoint needed here)
    first_config = app_config(
        bootstrap_servers, tmp_path / "a", num_standby_replicas=1, application_server="first:1"
    )
    second_config = app_config(
        bootstrap_servers,
        tmp_path / "b",
        app_id=first_config.application_id,
        num_standby_replicas=1,
        application_server="second:2",
    )
    with running_app(count_app(source), first_config) as first, running_app(count_app(source), second_config):
        wait_until(
            lambda: (
                len(first.local_standby_tasks()) == 2
                and sorted(
                    first.local_standby_tasks()
                    + [t for w in first.metadata_for_local_threads() for t in w["active_tasks"]]
                )
                == [f"0_{p}" for p in range(PARTITIONS)]
            ),
            60,
            "the first client keeps standbys of the second's two tasks",
        )
        standby_partitions = {int(t.split("_")[1]) for t in first.local_standby_tasks()}
        # new input after the standbys opened (they may have started from a fresh checkpoint)
        more = _records(200)
        produce(bootstrap_servers, source, more)
        expected = dict(Counter(k for k, _ in records + more))
        request = (
            StateQueryRequest.in_store(STORE)
            .with_query(RangeQuery.with_no_bounds())
            .with_partitions(standby_partitions)
        )

        wanted = {k: v for k, v in expected.items() if _partition_of(k) in standby_partitions}
        wait_until(lambda: _all_rows(first.query(request)) == wanted, 30, "the standbys applied the counts")
        answers = first.query(request).partition_results
        assert all(answers[p].is_success() and answers[p].position.is_empty() for p in standby_partitions)
        active_only = first.query(request.require_active()).partition_results
        assert {active_only[p].failure_reason for p in standby_partitions} == {FailureReason.NOT_ACTIVE}
        key = next(k for k in expected if _partition_of(k) in standby_partitions)

        def standby_published() -> bool:
            meta = first.query_metadata_for_key(STORE, key)
            return meta.active_host == HostInfo("second", 2) and meta.standby_hosts == {HostInfo("first", 1)}

        wait_until(standby_published, 20, "the metadata names the second as owner, the first as standby")
        body, _ = first.metrics.render()
        updates = {
            s.labels["task_id"]: s.value
            for family in text_string_to_metric_families(body.decode())
            if family.name == "kafka_streams_task_update"
            for s in family.samples
        }
        assert sorted(updates) == sorted(first.local_standby_tasks()) and all(v > 0 for v in updates.values())


def _partition_of(key: str) -> int:
    return default_partition(String().serialize(key) or b"", PARTITIONS)
