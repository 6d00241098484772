"""The Streams group protocol (KIP-1071) against Apache Kafka's group coordinator.

What the broker checks is the spec: ``StreamsGroup.validateOffsetCommit`` (group-coordinator,
Kafka 4.4) refuses an OffsetCommit below v9, from an unknown member, or at a stale member
epoch once the group has members, and checks a TxnOffsetCommit's member id and generation
when they are given. The membership side follows ``StreamsGroupHeartbeatRequestManager`` /
``StreamsMembershipManager`` (Kafka's clients module): join with epoch 0 and the topology,
report owned tasks, revoke what the broker no longer returns. Kafka's own
``kafka-streams-groups.sh`` (``StreamsGroupCommand``, from the broker's jars) reads the group.

These need a broker that speaks StreamsGroupHeartbeat: the Apache Kafka node (the shared one
when ``PLATFORM_STREAMS_BOOTSTRAP`` names it, else the session's), never the embedded broker.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State
from platform_streams.dev.brokers.apache_jars import kafka_classpath, require_java
from platform_streams.errors import StreamsError, TaskMigratedError
from platform_streams.kafka import KafkaAdmin, TopicSpec, create_consumer, create_producer, log_end_offsets
from platform_streams.kafka.streams_group import (
    CommitRefused,
    StreamsGroupClient,
    error_name,
    group_metadata,
)
from platform_streams.kafka.streams_group.group_config import set_group_configs
from platform_streams.kafka.streams_group.member import (
    Assignment,
    StreamsGroupRefused,
    StreamsMember,
    SubtopologySpec,
    TopologySpec,
)
from platform_streams.query import RangeQuery, StateQueryRequest, StateQueryResult
from platform_streams.runtime.membership.streams_group_membership import StreamsGroupMembership
from platform_streams.state import StateRestoreListener
from tests.integration.support_apps import (
    active_tasks,
    app_config,
    count_app,
    new_app_id,
    running_app,
    wait_until,
)
from tests.integration.test_incremental_rebalance import third_instance_joins
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]


def _wait(what: str, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _source_topic(bootstrap: str, partitions: int) -> tuple[str, str, TopologySpec]:
    tag = uuid.uuid4().hex[:10]
    app, topic = f"sg-{tag}", f"sg-in-{tag}"
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([TopicSpec(topic, partitions, replication_factor=-1)])
    return app, topic, TopologySpec(0, (SubtopologySpec("0", source_topics=(topic,)),))


class _Recorder:
    """A member's task changes, as its membership hands them over."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: set[tuple[str, int]] = set()
        self.revoked: list[tuple[str, int]] = []

    def __call__(self, revoked: Assignment, added: Assignment) -> None:
        with self.lock:
            self.active -= revoked.active
            self.revoked.extend(revoked.active)
            self.active |= added.active


@pytest.fixture
def members() -> Iterator[list[StreamsGroupMembership]]:
    started: list[StreamsGroupMembership] = []
    yield started
    for membership in started:
        membership.close()


def test_commits_name_the_member_and_epoch_the_broker_checks(
    streams_bootstrap: str, members: list[StreamsGroupMembership]
) -> None:
    """At-least-once: OffsetCommit v9 with the member id and epoch (librdkafka's own commit,
    naming no member, is refused). Exactly-once: librdkafka's transactional producer sends
    the member id and epoch given in the group-metadata bytes, and the coordinator fences a
    stale epoch (TxnOffsetCommit -> ILLEGAL_GENERATION)."""
    app, topic, topology = _source_topic(streams_bootstrap, 2)
    tasks = _Recorder()
    membership = StreamsGroupMembership(
        streams_bootstrap, app, topology, process_id=str(uuid.uuid4()), on_change=tasks
    )
    members.append(membership)
    membership.start()
    _wait("the broker to assign both tasks", lambda: len(tasks.active) == 2)
    epoch = membership.member_epoch
    assert epoch > 0

    membership.commit({(topic, 0): 3})
    with pytest.raises(CommitRefused) as stale:
        membership.client.commit(membership.member_id, epoch + 1, {(topic, 0): 4})
    assert error_name(stale.value.error_code) == "STALE_MEMBER_EPOCH"

    consumer = create_consumer(
        {"bootstrap.servers": streams_bootstrap, "group.id": app, "enable.auto.commit": False}
    )
    try:
        from confluent_kafka import KafkaException, TopicPartition

        consumer.assign([TopicPartition(topic, 0, 0)])
        with pytest.raises(KafkaException, match=r"UNKNOWN_MEMBER_ID|Unknown member"):
            consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)

        producer = create_producer({"bootstrap.servers": streams_bootstrap, "transactional.id": f"{app}-0"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic, 1, 7)], membership.group_metadata(), 30)
        producer.commit_transaction(30)

        producer.begin_transaction()
        with pytest.raises(KafkaException) as fenced:
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 1, 8)], group_metadata(app, membership.member_id, epoch + 1), 30
            )
        assert fenced.value.args[0].name() == "ILLEGAL_GENERATION"
        producer.abort_transaction(30)

        committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 3), (1, 7)]
    finally:
        consumer.close()


def _describe(bootstrap: str, app: str) -> str:
    """``kafka-streams-groups.sh --describe --members --verbose`` from the broker's own jars."""
    done = subprocess.run(
        [
            require_java(),
            "-cp",
            kafka_classpath(),
            "org.apache.kafka.tools.streams.StreamsGroupCommand",
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--members",
            "--verbose",
            "--group",
            app,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_third_member_takes_tasks_incrementally_and_kafkas_tool_sees_it(
    streams_bootstrap: str, members: list[StreamsGroupMembership]
) -> None:
    """Two members share six tasks; a third joins. Only the tasks that move to it are revoked
    from their owners (the others are never stopped), the three end up with two each, and
    Kafka's tool lists the three members with their tasks."""
    app, _, topology = _source_topic(streams_bootstrap, 6)
    recorders = [_Recorder() for _ in range(3)]

    def join(index: int) -> None:
        membership = StreamsGroupMembership(
            streams_bootstrap, app, topology, process_id=f"process-{index}", on_change=recorders[index]
        )
        members.append(membership)
        membership.start()

    join(0)
    join(1)
    # three each and no assignment pending: the first member alone may hold all six for a
    # moment, and a snapshot taken while the broker still moves tasks between the two would
    # count those moves as the third member's
    _wait(
        "two members to share the six tasks",
        lambda: all(len(r.active) == 3 for r in recorders[:2])
        and all(m.last and m.last.assignment is None for m in members),
        timeout=90,
    )
    before = [set(r.active) for r in recorders[:2]]
    # revocations from here on: the first member gave half its tasks to the second before
    revoked_before = [len(r.revoked) for r in recorders[:2]]
    join(2)
    _wait(
        "the third member to get its two tasks",
        lambda: all(len(r.active) == 2 for r in recorders),
        timeout=90,
    )
    moved = set(recorders[2].active)
    for old, recorder, already in zip(before, recorders[:2], revoked_before, strict=True):
        assert set(recorder.revoked[already:]) <= moved, "a task that stayed was stopped"
        assert old - moved <= recorder.active
    assert sum(len(old - moved) for old in before) == 4

    _wait(
        "the group to settle", lambda: all(m.last and m.last.assignment is None for m in members), timeout=30
    )

    def tool_lists_the_members() -> bool:
        # the tool reads what the members last reported: one heartbeat may still be on its way
        described = _describe(streams_bootstrap, app)
        for index, membership in enumerate(members):
            lines = [line for line in described.splitlines() if membership.member_id in line]
            partitions = ",".join(str(p) for _, p in sorted(recorders[index].active))
            if len(lines) != 1 or f"process-{index}" not in lines[0]:
                return False
            if f"ACTIVE: 0:[{partitions}];" not in lines[0]:
                return False
        return True

    _wait("Kafka's tool to list each member with its tasks", tool_lists_the_members, timeout=60)


def test_an_application_on_a_streams_group_counts_exactly(streams_bootstrap: str, tmp_path: Path) -> None:
    """``group_protocol="streams"`` under exactly-once: the broker assigns the tasks, the
    counts are exact, the committed offsets are the group's, and Kafka's tool shows the
    application's member with its tasks. Then the broker drops the member (a leave sent in
    its name: what a session timeout does to a paused process): the zombie's transaction
    cannot commit, its tasks are closed dirty, it joins again, and the counts stay exact."""
    with KafkaAdmin({"bootstrap.servers": streams_bootstrap}) as admin:
        source, sink = new_topic(admin, 4, "sg-src"), new_topic(admin, 4, "sg-out")
    records = [(f"k{i % 8}", "v") for i in range(200)]
    produce(streams_bootstrap, source, records)
    config = app_config(
        streams_bootstrap,
        tmp_path,
        group_protocol="streams",
        processing_guarantee="exactly_once_v2",
    )
    with running_app(count_app(source, sink).build(), config) as streams:
        wait_until(
            lambda: (
                _final_counts(consume_all(streams_bootstrap, sink, 10**6, 2, "read_committed"))
                == {f"k{i}": 25 for i in range(8)}
            ),
            90,
            "every key counted to 25",
        )
        [worker] = streams.workers
        assert worker.streams_group is not None and worker.streams_group.member_epoch > 0
        assert sorted(str(t) for t in worker.tasks) == ["0_0", "0_1", "0_2", "0_3"]
        described = _describe(streams_bootstrap, config.application_id)
        assert worker.streams_group.member_id in described
        assert "ACTIVE: 0:[0,1,2,3];" in described, described
        view = worker.streams_group_view()
        assert view is not None and view["group_state"] == "Stable" and view["members"] == 1
        assert view["member_epoch"] == worker.streams_group.member_epoch

        group = worker.streams_group
        removed_id, removed_epoch = group.member_id, group.member_epoch
        zombie = StreamsMember(
            StreamsGroupClient(streams_bootstrap, config.application_id),
            TopologySpec(0, ()),
            process_id="remover",
            member_id=removed_id,
        )
        zombie.member_epoch = removed_epoch
        zombie.leave()
        zombie.client.close()
        produce(streams_bootstrap, source, records)
        wait_until(
            lambda: (
                _final_counts(consume_all(streams_bootstrap, sink, 10**6, 2, "read_committed"))
                == {f"k{i}": 50 for i in range(8)}
            ),
            90,
            "every key counted to 50 after the member was dropped",
        )
        assert worker.migrations + group.fenced >= 1, "the dropped member's tasks were not closed"
        # the member joined again with a new epoch; on a loaded machine its tasks may still be
        # coming back in steps (a late heartbeat can cost it its tasks once more)
        wait_until(
            lambda: group.member_epoch != removed_epoch and len(worker.tasks) == 4,
            60,
            "the member to run all four tasks again under a new epoch",
        )


def _final_counts(records: list[Any]) -> dict[str, int]:
    """The highest count per key (the sink's big-endian Long values; counts only grow)."""
    counts: dict[str, int] = {}
    for record in records:
        key = record.key.decode()
        counts[key] = max(counts.get(key, 0), int.from_bytes(record.value, "big", signed=True))
    return counts


def test_a_third_instance_joining_leaves_the_unmoved_tasks_producing(
    streams_bootstrap: str, tmp_path: Path
) -> None:
    """Two instances of a counting app on a streams group run six tasks under steady input; a
    third joins. The broker moves two tasks to it; the four that keep their owner never stop
    (their longest output gap stays within the cooperative path's bound), and every count is
    exact afterwards (``test_incremental_rebalance``'s scenario and measure)."""
    app_id = new_app_id("sg")
    with KafkaAdmin({"bootstrap.servers": streams_bootstrap}) as admin:
        kept = third_instance_joins(
            streams_bootstrap,
            admin,
            lambda name: app_config(
                streams_bootstrap,
                tmp_path / name,
                app_id,
                statestore_cache_max_bytes=0,
                group_protocol="streams",
            ),
        )
    assert len(kept) == 4, f"only the two tasks the third instance takes may move; kept {kept}"


def test_a_dropped_member_that_joined_again_commits_nothing_before_its_lost_tasks_are_closed(
    streams_bootstrap: str, members: list[StreamsGroupMembership]
) -> None:
    """The broker checks a commit's member epoch only (StreamsGroup.validateMemberEpoch), not
    who owns the partitions. The heartbeat thread joins again at once after the broker dropped
    the member, so a worker still running the lost tasks would read the new epoch and commit
    their stale offsets (exactly-once: their transaction) over the tasks' new owner. Until the
    worker took the loss (``take_lost``: it closes the tasks uncommitted), the membership
    refuses both commit paths; Kafka's client likewise joins again only after onTasksLost."""
    app, topic, topology = _source_topic(streams_bootstrap, 2)
    membership = StreamsGroupMembership(streams_bootstrap, app, topology, process_id=str(uuid.uuid4()))
    members.append(membership)
    beat = lambda: membership.heartbeat_once() is not None  # noqa: E731
    _wait("the member to join", lambda: beat() and membership.member_epoch > 0)
    remover = StreamsMember(
        StreamsGroupClient(streams_bootstrap, app),
        TopologySpec(0, ()),
        process_id="remover",
        member_id=membership.member_id,
    )
    remover.member_epoch, dropped_epoch = membership.member_epoch, membership.member_epoch
    remover.leave()  # what a session timeout does to a paused process
    remover.client.close()
    rejoined = lambda: membership.fenced == 1 and membership.member_epoch > 0  # noqa: E731
    _wait("the member to be dropped and join again", lambda: beat() and rejoined())
    assert membership.member_epoch != dropped_epoch
    with pytest.raises(TaskMigratedError):
        membership.commit({(topic, 0): 3})
    with pytest.raises(TaskMigratedError):
        membership.group_metadata()
    assert membership.take_lost()
    membership.commit({(topic, 0): 3})  # the lost tasks are closed: commits go through again


def test_a_member_with_another_topology_is_refused_clearly(
    streams_bootstrap: str, members: list[StreamsGroupMembership]
) -> None:
    """The broker keeps the first topology a streams group is given and refuses a member with
    a different one (``INVALID_REQUEST``, "Topology updates are not supported yet"): the
    membership stops with an error saying why instead of retrying forever."""
    app, topic, topology = _source_topic(streams_bootstrap, 1)
    first = StreamsGroupMembership(
        streams_bootstrap, app, topology, process_id="first", on_change=_Recorder()
    )
    members.append(first)
    first.heartbeat_once()
    other = TopologySpec(
        0,
        (
            SubtopologySpec(
                "0",
                source_topics=(topic,),
                repartition_sinks=(f"{app}-x",),
            ),
        ),
    )
    second = StreamsGroupMembership(streams_bootstrap, app, other, process_id="second", on_change=_Recorder())
    members.append(second)
    second.start()
    _wait("the second member to give up", lambda: second.failure is not None, timeout=30)
    assert isinstance(second.failure, StreamsGroupRefused)
    assert "INVALID_REQUEST" in str(second.failure) and "topology it was first given" in str(second.failure)


def test_shutdown_application_reaches_the_other_members(
    streams_bootstrap: str, members: list[StreamsGroupMembership]
) -> None:
    """A member that asks for SHUTDOWN_APPLICATION and leaves at once (a worker whose
    uncaught-exception handler answered SHUTDOWN_APPLICATION) still tells the group: the
    other members get the broker's SHUTDOWN_APPLICATION status, as Kafka Streams' do
    (``StreamThread.handleStreamsRebalanceData`` runs the shutdown hook)."""
    app, _, topology = _source_topic(streams_bootstrap, 2)
    asked: list[bool] = []
    failing = StreamsGroupMembership(streams_bootstrap, app, topology, process_id="a", on_change=_Recorder())
    other = StreamsGroupMembership(
        streams_bootstrap,
        app,
        topology,
        process_id="b",
        on_change=_Recorder(),
        on_shutdown_request=lambda: asked.append(True),
    )
    members.append(other)
    failing.heartbeat_once()
    other.start()
    _wait("the other member to join", lambda: other.member_epoch > 0)
    failing.request_shutdown()
    failing.close(leave=True)
    _wait("the other member to be asked to shut down", lambda: bool(asked), timeout=30)
    assert other.shutdown_requested


class _Restored(StateRestoreListener):
    """Changelog records an instance's active tasks restored, per changelog partition."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[tuple[str, int], int] = {}

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        with self.lock:
            self.records[tp] = self.records.get(tp, 0) + num_restored

    def of(self, tp: tuple[str, int]) -> int:
        with self.lock:
            return self.records.get(tp, 0)


def _rows(streams: KafkaStreams, partition: int) -> dict[str, int]:
    """The ``counts`` rows one instance holds for one partition (its active or its standby)."""
    request = StateQueryRequest.in_store("counts").with_query(RangeQuery.with_no_bounds())
    result: StateQueryResult = streams.query(request.with_partitions({partition}))
    answer = result.partition_results.get(partition)
    return dict(answer.result) if answer is not None and answer.is_success() else {}


def test_a_broker_assigned_standby_is_kept_warm_and_takes_over_with_a_small_restore(
    streams_bootstrap: str, tmp_path: Path
) -> None:
    """The group config ``streams.num.standby.replicas=1`` (a group setting under the streams
    protocol: Kafka Streams ignores ``num.standby.replicas`` there) makes the broker give each of
    two instances a standby of the other's task. The standby keeps its store updated from the
    changelog (it holds what the owner's store holds); when the owner closes, the broker moves
    the task to the standby's member, which restores only a small tail. The standby's position
    reaches the broker as the member's task offset (what places standbys and promotes
    warm-ups). ``test_standby``'s failover scenario on a streams group."""
    with KafkaAdmin({"bootstrap.servers": streams_bootstrap}) as admin:
        source, sink = new_topic(admin, 2, "sg-sb-src"), new_topic(admin, 2, "sg-sb-out")
    app_id = new_app_id("sg-sb")
    set_group_configs(streams_bootstrap, app_id, {"streams.num.standby.replicas": "1"})
    changelog = f"{app_id}-counts-changelog"
    records = [(f"k{i % 40}", "v") for i in range(2000)]
    produce(streams_bootstrap, source, records)

    def config(name: str) -> Any:
        return app_config(
            streams_bootstrap, tmp_path / name, app_id, statestore_cache_max_bytes=0, group_protocol="streams"
        )

    restored = _Restored()
    survivor = KafkaStreams(count_app(source, sink).build(), config("b"))
    survivor.set_global_state_restore_listener(restored)
    try:
        with running_app(count_app(source, sink).build(), config("a")) as owner:
            survivor.start()

            def placed() -> tuple[int, int] | None:
                mine, theirs = active_tasks(survivor), active_tasks(owner)
                if len(mine) != 1 or len(theirs) != 1:
                    return None
                if survivor.local_standby_tasks() != theirs or owner.local_standby_tasks() != mine:
                    return None
                return int(mine[0].split("_")[1]), int(theirs[0].split("_")[1])

            placement = wait_until(placed, 90, "one task each, and a standby of the other's")
            assert placement is not None
            moved = placement[1]
            counted = dict(Counter(k for k, _ in records))
            wait_until(
                lambda: {**_rows(owner, moved), **_rows(survivor, 1 - moved)} == counted,
                60,
                "every key counted",
            )
            wait_until(
                lambda: _rows(survivor, moved) == _rows(owner, moved),
                60,
                "the survivor's standby holds what the owner's store holds",
            )
            tp = (changelog, moved)
            size = log_end_offsets({"bootstrap.servers": streams_bootstrap}, [tp])[tp]
            assert size >= 500, f"the moved task's changelog holds {size} records"
            [worker] = survivor.workers
            group = worker.streams_group
            assert group is not None

            def reported() -> list[tuple[str, int, int]]:
                try:
                    described = group.client.describe()
                except StreamsError:  # e.g. the coordinator moving: asked again
                    return []
                offsets = [m.task_offsets for m in described.members if m.member_id == group.member_id]
                return [(t.subtopology_id, int(t.partition), int(t.offset)) for ts in offsets for t in ts]

            # the standby's position reaches the broker (its task offset: the next offset to read)
            wait_until(lambda: reported() == [("0", moved, size)], 30, "the standby's offset reported", 0.5)
            before = restored.of(tp)
        # the owner closed (left the group): the broker hands its task to the standby's member
        wait_until(
            lambda: active_tasks(survivor) == ["0_0", "0_1"] and survivor.state() is State.RUNNING,
            60,
            "the survivor runs both tasks",
        )
        produce(streams_bootstrap, source, records)
        wait_until(
            lambda: (
                _final_counts(consume_all(streams_bootstrap, sink, 10**6, 2))
                == {f"k{i}": 100 for i in range(40)}
            ),
            60,
            "every key counted to 100 after the takeover",
        )
        replayed = restored.of(tp) - before  # the takeover's restore is over: the task counted
        assert replayed < size // 10, f"the warm standby still restored {replayed} of {size} records"
    finally:
        assert survivor.close(timeout_s=60)
