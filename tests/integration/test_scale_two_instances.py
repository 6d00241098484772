"""Two instances of one application split the partitions between them and lose nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.kafka import KafkaAdmin
from tests.integration.support_apps import (
    active_tasks,
    app_config,
    join_then_leave,
    log_ends,
    running_app,
    upper_case_app,
    wait_until,
)
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


def test_two_instances_split_four_partitions_and_output_is_complete(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 4, "out")
    first_config = app_config(bootstrap_servers, tmp_path / "a")
    second_config = app_config(bootstrap_servers, tmp_path / "b", app_id=first_config.application_id)
    placed = produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(2_000)])
    with running_app(upper_case_app(source, sink), first_config) as first:
        assert active_tasks(first) == ["0_0", "0_1", "0_2", "0_3"]
        assert len(consume_all(bootstrap_servers, sink, 2_000, timeout_s=30)) == 2_000
        with running_app(upper_case_app(source, sink), second_config) as second:

            def split() -> bool:
                a, b = active_tasks(first), active_tasks(second)
                both_running = first.state() is State.RUNNING and second.state() is State.RUNNING
                return (
                    both_running
                    and len(a) == 2
                    and len(b) == 2
                    and sorted(a + b) == [f"0_{p}" for p in range(4)]
                )

            wait_until(split, 30, "each instance runs two of the four tasks")
            placed += produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(2_000, 6_000)])
            records = consume_all(bootstrap_servers, sink, 6_000, timeout_s=30)
            assert all(t["processed_total"] > 0 for t in first.metadata_for_local_threads())
            assert all(t["processed_total"] > 0 for t in second.metadata_for_local_threads())
    assert Counter(r.value for r in records) == Counter(f"V{i}".encode() for i in range(6_000))
    ends = log_ends(placed, source, 4)
    assert admin.committed_offsets(first_config.application_id, list(ends)) == ends


def test_two_workers_in_one_client_split_the_partitions(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 4, "out")
    produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(1_000)])
    config = app_config(bootstrap_servers, tmp_path, num_stream_threads=2)
    with running_app(upper_case_app(source, sink), config) as streams:
        wait_until(
            lambda: sorted(len(t["active_tasks"]) for t in streams.metadata_for_local_threads()) == [2, 2],
            30,
            "each worker runs two tasks",
        )
        assert active_tasks(streams) == ["0_0", "0_1", "0_2", "0_3"]
        records = consume_all(bootstrap_servers, sink, 1_000, timeout_s=30)
        names = [t["thread_name"] for t in streams.metadata_for_local_threads()]
    assert len(set(names)) == 2 and all("StreamThread-" in n for n in names)
    assert Counter(r.value for r in records) == Counter(f"V{i}".encode() for i in range(1_000))


def test_an_instance_leaving_hands_its_partitions_over(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 4, "out")
    first_config = app_config(bootstrap_servers, tmp_path / "a")
    second = KafkaStreams(
        upper_case_app(source, sink),
        app_config(bootstrap_servers, tmp_path / "b", app_id=first_config.application_id),
    )
    with running_app(upper_case_app(source, sink), first_config) as first:
        join_then_leave(first, second, first_keeps=2, total=4)
        produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(500)])
        assert len(consume_all(bootstrap_servers, sink, 500, timeout_s=30)) == 500
