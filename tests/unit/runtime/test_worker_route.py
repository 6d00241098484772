"""``StreamWorker._route`` (``InputQueues``): consumed batches go to partition queues run by run,
in order; backlogged partitions are paused and resumed once drained."""

from __future__ import annotations

from collections import deque
from typing import Any

import confluent_kafka as ck
import pytest

from platform_streams.runtime.workers.input_queues import InputQueues
from platform_streams.runtime.workers.worker import StreamWorker


def _worker(partitions: list[tuple[str, int]]) -> Any:
    """A worker with queues only: ``_route`` needs nothing else (no clients, no tasks)."""
    worker = StreamWorker.__new__(StreamWorker)
    worker._input = InputQueues(max_buffered=4)
    worker._input.add({tp: deque() for tp in partitions})
    worker._rejoin_deadline = None
    return worker


def _msg(topic: str, partition: int, offset: int) -> Any:
    return ck.Message(topic=topic, partition=partition, offset=offset, key=b"k", value=b"v")


def _eof(topic: str, partition: int) -> Any:
    return ck.Message(topic=topic, partition=partition, error=ck.KafkaError(ck.KafkaError._PARTITION_EOF))


def _offsets(queue: deque[Any]) -> list[int]:
    return [m.offset() for m in queue]


def test_runs_of_partitions_keep_their_order_and_interleave() -> None:
    worker = _worker([("a", 0), ("a", 1), ("b", 0)])
    batch = [
        _msg("a", 0, 0),
        _msg("a", 0, 1),
        _msg("a", 1, 7),
        _msg("b", 0, 3),
        _msg("a", 0, 2),
        _msg("a", 1, 8),
    ]
    touched = worker._route(batch)
    assert touched == {("a", 0), ("a", 1), ("b", 0)}
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1, 2]
    assert _offsets(worker._input.queues[("a", 1)]) == [7, 8]
    assert _offsets(worker._input.queues[("b", 0)]) == [3]


def test_a_single_run_is_queued_whole() -> None:
    worker = _worker([("a", 0)])
    assert worker._route([_msg("a", 0, i) for i in range(5)]) == {("a", 0)}
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1, 2, 3, 4]


def test_error_events_split_runs_and_are_not_queued() -> None:
    worker = _worker([("a", 0)])
    touched = worker._route([_msg("a", 0, 0), _eof("a", 0), _msg("a", 0, 1), _eof("a", 0)])
    assert touched == {("a", 0)}
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1]


def test_a_fatal_error_raises_after_the_records_before_it_were_queued() -> None:
    worker = _worker([("a", 0)])
    fatal = ck.Message(topic="a", partition=0, error=ck.KafkaError(ck.KafkaError._FATAL, fatal=True))
    with pytest.raises(ck.KafkaException):
        worker._route([_msg("a", 0, 0), fatal, _msg("a", 0, 1)])
    assert _offsets(worker._input.queues[("a", 0)]) == [0]


def test_records_of_unassigned_partitions_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    worker = _worker([("a", 0)])
    touched = worker._route([_msg("a", 0, 0), _msg("x", 3, 0), _msg("x", 3, 1), _msg("a", 0, 1)])
    assert touched == {("a", 0)}
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1]
    assert "dropping 2 record(s) of unassigned partition x-3" in caplog.text


class _Consumer:
    """Records pause/resume calls (the only consumer calls backpressure makes)."""

    def __init__(self, assignment: list[Any] | None = None) -> None:
        self.paused: set[tuple[str, int]] = set()
        self._assignment = assignment or []

    def pause(self, tps: list[Any]) -> None:
        self.paused.update((tp.topic, tp.partition) for tp in tps)

    def resume(self, tps: list[Any]) -> None:
        self.paused.difference_update((tp.topic, tp.partition) for tp in tps)

    def assignment(self) -> list[Any]:
        return self._assignment


def test_a_partition_over_the_limit_after_processing_is_paused_and_resumed_at_half() -> None:
    worker, consumer = _worker([("a", 0), ("a", 1)]), _Consumer()
    inputs: InputQueues = worker._input
    touched = worker._route([_msg("a", 0, i) for i in range(5)] + [_msg("a", 1, i) for i in range(4)])
    inputs.pause_backlogged(consumer, touched)
    assert consumer.paused == {("a", 0)} == inputs.paused  # 5 > 4; 4 is not over the limit
    queue = inputs.queues[("a", 0)]
    queue.popleft()
    queue.popleft()
    inputs.resume_drained(consumer)
    assert consumer.paused == {("a", 0)}  # 3 left: over half of 4
    queue.popleft()
    inputs.resume_drained(consumer)
    assert consumer.paused == set() == inputs.paused


def test_pause_all_pauses_the_assignment_and_clear_forgets_everything() -> None:
    worker = _worker([("a", 0)])
    inputs: InputQueues = worker._input
    consumer = _Consumer([ck.TopicPartition("a", 0), ck.TopicPartition("a", 1)])
    inputs.pause_all(consumer)
    assert consumer.paused == {("a", 0), ("a", 1)} == inputs.paused
    worker._route([_msg("a", 0, 0)])
    assert inputs.backlog()
    inputs.clear()
    assert not inputs.backlog() and inputs.paused == set() and inputs.queues == {}


def test_one_topic_batches_route_run_by_run_with_counts_and_unassigned_partitions_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The one-topic path (``InputQueues._route_one_topic``): interleaved runs of one topic's
    partitions keep their order, each partition's count grows by its records, and a run of a
    partition of the same topic with no queue is dropped with the warning."""
    worker = _worker([("a", 0), ("a", 1)])
    batch = [
        _msg("a", 0, 0),
        _msg("a", 1, 5),
        _msg("a", 1, 6),
        _msg("a", 2, 9),
        _msg("a", 0, 1),
        _msg("a", 0, 2),
    ]
    assert worker._route(batch) == {("a", 0), ("a", 1)}
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1, 2]
    assert _offsets(worker._input.queues[("a", 1)]) == [5, 6]
    assert worker._input.consumed == {("a", 0): 3, ("a", 1): 2}
    assert "dropping 1 record(s) of unassigned partition a-2" in caplog.text


def test_records_of_another_type_in_a_batch_take_the_general_loop() -> None:
    """A batch mixing ``confluent_kafka.Message`` with another record type (a test double)
    cannot be mapped over one type's methods: the general loop routes it, in order."""

    class Double:
        def __init__(self, offset: int) -> None:
            self._offset = offset

        def error(self) -> None:
            return None

        def topic(self) -> str:
            return "a"

        def partition(self) -> int:
            return 0

        def offset(self) -> int:
            return self._offset

    worker = _worker([("a", 0)])
    assert worker._route([_msg("a", 0, 0), Double(1), _msg("a", 0, 2)]) == {("a", 0)}
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1, 2]
    # a double first: its methods must not be mapped over the client's messages
    worker = _worker([("a", 0), ("a", 1)])
    assert worker._route([Double(1), _msg("a", 1, 5), _msg("a", 0, 2)]) == {("a", 0), ("a", 1)}
    assert _offsets(worker._input.queues[("a", 0)]) == [1, 2]
    assert _offsets(worker._input.queues[("a", 1)]) == [5]


def test_one_topic_batches_take_the_c_level_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of ``Message``s of one topic without error events is routed by
    ``_route_one_topic`` (the general loop is not entered); one with an error event is not."""
    worker = _worker([("a", 0)])
    taken: list[bool] = []
    original = InputQueues._route_one_topic

    def spy(self: InputQueues, *args: Any) -> bool:
        taken.append(original(self, *args))
        return taken[-1]

    monkeypatch.setattr(InputQueues, "_route_one_topic", spy)
    worker._route([_msg("a", 0, 0), _msg("a", 0, 1)])
    worker._route([_msg("a", 0, 2), _eof("a", 0)])
    assert taken == [True, False]
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1, 2]


def test_records_a_partition_delivered_again_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    # librdkafka moved a position back by itself (a late offset lookup of an earlier
    # assignment): the records read already must not be processed twice
    worker = _worker([("a", 0), ("a", 1)])
    worker._route([_msg("a", 0, i) for i in range(5)])
    touched = worker._route([*(_msg("a", 0, i) for i in range(2, 7)), _msg("a", 1, 0)])
    assert _offsets(worker._input.queues[("a", 0)]) == [0, 1, 2, 3, 4, 5, 6]
    assert touched == {("a", 0), ("a", 1)}
    assert worker._input.redelivered == 3
    assert "a-0: the consumer delivered offsets 2..4 again (the next one due was 5)" in caplog.text
    # a run of records read already only is dropped whole
    assert worker._route([_msg("a", 0, 0), _msg("a", 0, 1), _msg("a", 1, 0)]) == set()
    assert worker._input.redelivered == 6


def test_a_position_the_worker_sets_may_go_back() -> None:
    worker = _worker([("a", 0), ("a", 1)])
    worker._route([*(_msg("a", 0, i) for i in range(5)), *(_msg("a", 1, i) for i in range(5))])
    worker._input.queues[("a", 0)].clear()  # processed
    worker._input.queues[("a", 1)].clear()
    # a rebuilt task reads from its committed offset; an unknown position takes what comes
    worker._input.positioned(_Consumer(), {("a", 0): 1, ("a", 1): None})
    worker._route([_msg("a", 0, 1), _msg("a", 0, 2), _msg("a", 1, 0)])
    assert _offsets(worker._input.queues[("a", 0)]) == [1, 2]
    assert _offsets(worker._input.queues[("a", 1)]) == [0]
    assert worker._input.redelivered == 0
    # a new task's queues start afresh; so do the queues after the tasks closed
    worker._input.add({("a", 0): deque()})
    worker._route([_msg("a", 0, 0)])
    assert _offsets(worker._input.queues[("a", 0)]) == [0]
    worker._input.clear()
    worker._input.add({("a", 1): deque()})
    worker._route([_msg("a", 1, 0)])
    assert _offsets(worker._input.queues[("a", 1)]) == [0]
    assert worker._input.redelivered == 0
