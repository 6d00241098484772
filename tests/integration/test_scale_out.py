"""Scale-out across processes: N worker processes of one application split its tasks.

Both ways of starting workers are covered -- the Python API (``run_workers``) and
``platform-streams run --workers 2`` -- and in both each worker process is a group member
with its own state directory; who runs what is read from the application's control topic,
where every client publishes its tasks. Co-partitioned inputs must land on the same
process: checked on a join of two 4-partition topics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.errors import BrokerError, CoPartitioningError
from platform_streams.kafka import KafkaAdmin
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.assignment import tasks_of_assignment
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.serde import Long, String
from platform_streams.topology.compiler import compile_topology
from tests.integration.eos_support import committed_all, new_app_id
from tests.integration.support_apps import active_tasks, app_config, read_to_end, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

REPO = Path(__file__).parents[2]


def _members(bootstrap: str, app_id: str) -> dict[str, list[str]]:
    """Process id -> active tasks, as the clients last published them on the control topic."""
    latest: dict[str, list[str] | None] = {}
    try:
        records = consume_all(bootstrap, control_topic_name(app_id), 10_000, timeout_s=1)
    except BrokerError:  # not created yet: the workers are still starting
        return {}
    for record in records:
        key = (record.key or b"").decode()
        if key.startswith("member/"):
            latest[key] = json.loads(record.value)["active"] if record.value else None
    return {k: v for k, v in latest.items() if v is not None}


def _split_in_two(bootstrap: str, app_id: str) -> dict[str, list[str]] | None:
    members = _members(bootstrap, app_id)
    tasks = sorted(t for ts in members.values() for t in ts)
    if (
        len(members) == 2
        and all(len(ts) == 2 for ts in members.values())
        and tasks == [f"0_{p}" for p in range(4)]
    ):
        return members
    return None


def _run_and_check(
    argv: list[str],
    env: dict[str, str],
    bootstrap: str,
    admin: KafkaAdmin,
    app_id: str,
    source: str,
    log_path: Path,
) -> None:
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            members = wait_until(
                lambda: _split_in_two(bootstrap, app_id), 60, "two processes run two tasks each"
            )
            assert len(set(members)) == 2
            wait_until(
                lambda: committed_all(admin, app_id, source, 4, bootstrap), 60, "every input committed"
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, f"the supervisor should stop cleanly; see {log_path}"
        finally:
            if proc.poll() is None:
                proc.kill()
    for index in range(2):  # each worker process kept its own state directory
        assert (Path(f"{env['STATE_DIR']}-w{index}") / app_id / ".process-id").exists()


@pytest.mark.broker
@pytest.mark.parametrize("how", ["python-api", "cli"])
def test_two_worker_processes_split_four_partitions(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, how: str
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 4, "out")
    records = [(f"k{i % 100}", "x") for i in range(4_000)]
    produce(bootstrap_servers, source, records)
    app_id = new_app_id("scale")
    state_dir = tmp_path / "state"
    env = {**os.environ, "SCALE_OUT_INPUT": source, "SCALE_OUT_OUTPUT": sink, "STATE_DIR": str(state_dir)}
    if how == "python-api":
        argv = [
            sys.executable,
            "-m",
            "tests.integration.scale_out_app",
            "--bootstrap",
            bootstrap_servers,
            "--app-id",
            app_id,
            "--state-dir",
            str(state_dir),
            "--workers",
            "2",
        ]
    else:
        argv = [
            sys.executable,
            "-m",
            "platform_streams.cli",
            "run",
            "tests.integration.scale_out_app:topology",
            "--workers",
            "2",
            "--set",
            f"application_id={app_id}",
            "--set",
            f"bootstrap_servers={bootstrap_servers}",
            "--set",
            f"state_dir={state_dir}",
            "--set",
            "commit_interval_ms=200",
            "--set",
            "session_timeout_ms=6000",
            "--set",
            "heartbeat_interval_ms=500",
            "--set",
            "max_poll_interval_ms=10000",
        ]
    _run_and_check(argv, env, bootstrap_servers, admin, app_id, source, tmp_path / "supervisor.log")
    # the whole sink (every update, all 4 partitions), not the first 100 records read: only
    # the last update per key is the count, and read order across partitions is arbitrary
    latest = {
        (r.key or b"").decode(): int.from_bytes(r.value or b"", "big")
        for r in read_to_end(bootstrap_servers, sink, 4)
    }
    assert latest == Counter(k for k, _ in records)


def test_co_partitioned_inputs_always_form_whole_tasks() -> None:
    """The range assignor gives a member partition p of every co-partitioned topic; a split
    assignment (another assignor, unequal partition counts) is refused, never run."""
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed(key_serde=String(), value_serde=String()))
    right = builder.table("right", Consumed(key_serde=String(), value_serde=String()))
    left.join(right, lambda a, b: a + b).to("joined", Produced(key_serde=String(), value_serde=String()))
    plan = compile_topology(builder.build())
    whole = [("left", 1), ("right", 1), ("left", 3), ("right", 3)]
    assert tasks_of_assignment(plan, "app", whole) == [TaskId(0, 1), TaskId(0, 3)]
    with pytest.raises(CoPartitioningError, match="partition 3"):
        tasks_of_assignment(plan, "app", [("left", 1), ("right", 1), ("left", 3)])


@pytest.mark.broker
@pytest.mark.kafka_side  # make test's time split: a long wait on group joins
def test_a_static_member_restarted_gets_its_tasks_back_and_reuses_its_state(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """``group_instance_id`` (the Helm chart sets it from the pod name): a restart keeps the
    placement (on Kafka without a rebalance; on Tansu the rebalance gives the same partitions
    back) and the restarted member reopens its local stores instead of restoring them."""
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 4, "out")
    produce(bootstrap_servers, source, [(f"k{i % 100}", "x") for i in range(4_000)])
    first = app_config(bootstrap_servers, tmp_path / "a", group_instance_id="pod-a")
    second = app_config(
        bootstrap_servers, tmp_path / "b", group_instance_id="pod-b", app_id=first.application_id
    )
    with running_app(_counting(source, sink), first) as a:
        b = KafkaStreams(_counting(source, sink), second)
        b.start()
        try:
            wait_until(lambda: len(active_tasks(a)) == 2 and len(active_tasks(b)) == 2, 45, "a static split")
            wait_until(
                lambda: committed_all(admin, first.application_id, source, 4, bootstrap_servers), 30, "done"
            )
            before = (active_tasks(a), active_tasks(b))
        finally:
            assert b.close(timeout_s=30)
        again = KafkaStreams(_counting(source, sink), second)
        again.start()
        try:
            # both members settled: the survivor applies the rebalance in its own loop, so it
            # may still show its interim tasks when the restarted member is already RUNNING
            wait_until(
                lambda: (
                    again.state() is State.RUNNING
                    and a.state() is State.RUNNING
                    and len(active_tasks(again)) == 2
                    and len(active_tasks(a)) == 2
                ),
                45,
                "rejoined",
            )
            assert (active_tasks(a), active_tasks(again)) == before
            restored = sum(
                sum(c.values()) for w in again.workers for c in w.state_lifecycle.last_restore.values()
            )
            assert restored == 0, "the clean close checkpointed the stores: nothing to replay"
        finally:
            assert again.close(timeout_s=30)


def _counting(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream(
        source, Consumed(key_serde=String(), value_serde=String())
    ).group_by_key().count().to_stream().to(sink, Produced(key_serde=String(), value_serde=Long()))
    return builder
