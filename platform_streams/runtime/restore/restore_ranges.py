"""Changelog ranges a restore applies without reading each record's source-position header.

Why: a restore keeps only changelog records written for committed input
(:mod:`platform_streams.runtime.restore.changelog_filter`), which means reading every record's
``__ps_src`` header. confluent-kafka builds a Python list of header tuples per record for
that: about a third of a restore's CPU (py-spy of the count_unique restore in
bench/RESULTS.md). Most of a changelog needs no such check: whatever a task
wrote and had acknowledged before a commit was written for input that commit covers.

What a range claims. A task instance (a task from its creation in a worker to its close)
writes its changelog partitions after its restore. At each commit, once its records are
acknowledged and the input offsets ``O`` committed, the changelog offsets from its first
acknowledged write to its last one hold only its own writes for input below ``O`` (writes
from a cache flush or punctuation name the last offset consumed, also below ``O``). A
restore whose committed offsets are at least ``O`` on every input partition would apply each
of those records anyway; it skips the header check for offsets in ``[start, end)``.

A new instance continues the range it restored with when its first write lands right
after the range's end (at-least-once: at the end; exactly-once: one offset later, the
commit marker of the range's last transaction). Anything else between them -- an earlier
instance's uncommitted writes, an open or aborted transaction -- breaks the chain, and the
new range starts at the new instance's first write: records outside every range are still
judged by their headers, so a crashed instance's uncommitted tail is skipped as before.
The first write is the first *acknowledged* one: where only a transaction's last changelog
record is reported (deferred exactly-once, on a broker that needs it) a range rarely
continues, which costs restore speed only.

Where ranges live: the control topic (``range/<task id>``, compacted; a reset deletes it
with the changelogs; deleting changelogs alone writes tombstones for the ranges:
:func:`forget_published_ranges`), written after a commit at most every
:data:`PUBLISH_EVERY_S` per task and at every clean close, without waiting for the broker
(a range lost to a crash costs restore speed only), read by every client's control
channel. A restore trusts a range only when its input partitions are the task's and the
committed offsets are at least the range's (an offsets reset moves them back: the range is
then ignored). A restore that falls back to read_uncommitted (task_state.py) trusts none.

Not covered: a second writer of the same changelog partition at the same time, i.e. a
zombie instance in another client under at-least-once (Kafka Streams does not guard
against it either; exactly-once fences it). Within a client, an instance that takes a
task another worker thread closed dirty claims none of its own writes for
:data:`IN_FLIGHT_S`: the closed instance's records may still land. A source topic reused
as a changelog gets no range (its restore compares offsets, which costs nothing).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsTimeoutError
from platform_streams.kafka import OFFSET_BEGINNING, create_producer, read_partition_batches
from platform_streams.processor.task_id import TaskId

__all__ = [
    "PUBLISH_EVERY_S",
    "RANGE_KEY_PREFIX",
    "ChangelogRange",
    "RestoreRanges",
    "TaskRanges",
    "Written",
    "forget_published_ranges",
]

log = logging.getLogger(__name__)

RANGE_KEY_PREFIX = "range/"
#: a task's range is written at most this often (and at every clean close)
PUBLISH_EVERY_S = 10.0
#: how long a restore waits for the control channel's first read of the topic
CATCH_UP_S = 5.0
#: after a dirty close, how long its records may still be in flight (librdkafka's default
#: delivery timeout): an instance of the task begun in this client meanwhile claims nothing
IN_FLIGHT_S = 300.0

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class ChangelogRange:
    """``[start, end)`` of one changelog partition; ``transactional``: written under exactly-once
    (the offset after ``end`` then holds the commit marker)."""

    start: int
    end: int
    transactional: bool

    def continued_by(self, first_write: int) -> bool:
        """True if an instance whose first acknowledged write is at ``first_write`` continues
        this range: nothing but this range's own commit marker lies between them."""
        return self.end <= first_write <= self.end + int(self.transactional)


@dataclass(frozen=True)
class TaskRanges:
    """A task's committed input offsets and the changelog ranges written for input below them."""

    inputs: Mapping[TopicPartitionKey, int]
    changelogs: Mapping[TopicPartitionKey, ChangelogRange]

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": [[t, p, o] for (t, p), o in sorted(self.inputs.items())],
            "changelogs": [
                [t, p, r.start, r.end, r.transactional] for (t, p), r in sorted(self.changelogs.items())
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskRanges | None:
        """None for anything that is not this shape (another version wrote it: ignored)."""
        try:
            inputs = {(str(t), int(p)): int(o) for t, p, o in data["inputs"]}
            changelogs = {
                (str(t), int(p)): ChangelogRange(int(s), int(e), bool(x))
                for t, p, s, e, x in data["changelogs"]
            }
        except (KeyError, TypeError, ValueError):
            return None
        return cls(inputs, changelogs)

    def trusted(
        self, inputs: Iterable[TopicPartitionKey], committed: Mapping[TopicPartitionKey, int | None]
    ) -> bool:
        """True if a restore with these committed offsets may apply the ranges unchecked: the
        same input partitions, none committed below the range's offsets."""
        if set(self.inputs) != set(inputs):
            return False
        return all((committed.get(tp) or 0) >= offset for tp, offset in self.inputs.items())


class Written(NamedTuple):
    """A worker's acknowledged changelog writes: per partition the first offset since its
    task's instance began and the last one, and whether they were written in transactions."""

    first: Mapping[TopicPartitionKey, int]
    last: Mapping[TopicPartitionKey, int]
    transactional: bool


class _Instance:
    """One task instance's ranges: what it inherited and what it has written since."""

    def __init__(
        self,
        inherited: Mapping[TopicPartitionKey, ChangelogRange],
        committed: Mapping[TopicPartitionKey, int],
        claims: bool,
    ) -> None:
        self.inherited = dict(inherited)
        #: False: it publishes what it inherited, never a range of its own writes
        self.claims = claims
        #: the input offsets committed when it began (its own commits come on top)
        self.committed_at_start = dict(committed)
        self.published_at = 0.0
        #: what it published last (unchanged ranges are not written again)
        self.published: TaskRanges | None = None
        #: the worker thread that runs it (a task may move to another thread of the client)
        self.owner = threading.get_ident()

    def committed(self, task: Any) -> dict[TopicPartitionKey, int] | None:
        """The task's committed input offsets, or None while one of its partitions has none."""
        out = {}
        for tp in task.partitions:
            offset = task.committed.get(tp, self.committed_at_start.get(tp))
            if offset is None:
                return None
            out[tp] = offset
        return out

    def ranges(self, task: Any, written: Written) -> dict[TopicPartitionKey, ChangelogRange]:
        out = {}
        inputs = set(task.partitions)
        for tp in task.changelog_partitions:
            if tp in inputs or not self.claims:
                # a source topic reused as changelog is written by sinks, not by the store
                # (its restore judges offsets alone); an instance that may share its changelog
                # with records still in flight claims nothing of its own
                if tp not in inputs and tp in self.inherited:
                    out[tp] = self.inherited[tp]
                continue
            before = self.inherited.get(tp)
            start, end = written.first.get(tp), written.last.get(tp)
            if start is None or end is None or end < start:
                if before is not None:  # nothing written yet: what it restored with still holds
                    out[tp] = before
                continue
            if before is not None and before.continued_by(start):
                start = before.start
            out[tp] = ChangelogRange(start, end + 1, written.transactional)
        return out


class RestoreRanges:
    """The ranges of a client: the latest each task published (from the control channel), and
    the instances of this client's tasks that publish theirs.

    ``publish(key, value)`` writes a control record (None: ranges are kept, not written, as in
    tests without a control channel). Thread-safe: the channel's thread feeds
    :meth:`on_record`; each worker thread begins, commits and closes its own tasks.
    """

    def __init__(
        self,
        publish: Callable[[str, dict[str, Any]], None] | None = None,
        caught_up: Callable[[], bool] | None = None,
    ) -> None:
        self._publish = publish
        #: True once every range record written before this client started has been read
        self._caught_up = caught_up
        self._lock = threading.Lock()
        self._latest: dict[TaskId, TaskRanges] = {}
        self._instances: dict[TaskId, _Instance] = {}
        #: task -> when and by which thread an instance of it was closed dirty in this client
        self._dirty_closes: dict[TaskId, tuple[float, int]] = {}

    def on_record(self, key: str, value: Mapping[str, Any] | None) -> None:
        """A ``range/<task id>`` record of the control topic (None: a tombstone)."""
        try:
            task_id = TaskId.parse(key[len(RANGE_KEY_PREFIX) :])
        except ValueError:
            return
        ranges = None if value is None else TaskRanges.from_json(value)
        with self._lock:
            if ranges is None:
                self._latest.pop(task_id, None)
            else:
                self._latest[task_id] = ranges

    def latest(self, task_id: TaskId) -> TaskRanges | None:
        """The last ranges of ``task_id`` published (by any client) or read from the control topic."""
        with self._lock:
            return self._latest.get(task_id)

    def for_restore(
        self,
        task_id: TaskId,
        inputs: Iterable[TopicPartitionKey],
        committed: Mapping[TopicPartitionKey, int | None],
    ) -> dict[TopicPartitionKey, ChangelogRange]:
        """The changelog ranges a restore of ``task_id`` may apply unchecked (empty if none is
        trusted), remembered as what the task's new instance continues.

        Waits up to :data:`CATCH_UP_S` for the control channel to have read the topic once:
        a range missed here is not only unread, the new instance cannot continue it either.
        """
        deadline = time.monotonic() + CATCH_UP_S
        while self._caught_up is not None and not self._caught_up():
            if time.monotonic() >= deadline:
                log.warning("the control channel has not read its topic yet: restoring without ranges")
                self._caught_up = None  # waited once for this client: not again
                break
            time.sleep(0.05)
        with self._lock:
            latest = self._latest.get(task_id)
        inputs = list(inputs)
        inherited = (
            dict(latest.changelogs) if latest is not None and latest.trusted(inputs, committed) else {}
        )
        at_start = {tp: offset for tp in inputs if (offset := committed.get(tp)) is not None}
        with self._lock:
            dirty = self._dirty_closes.get(task_id)
            claims = (
                dirty is None
                or dirty[1] == threading.get_ident()  # its records were waited for (forget_first_offsets)
                or time.monotonic() - dirty[0] > IN_FLIGHT_S
            )
            self._instances[task_id] = _Instance(inherited, at_start, claims)
        return inherited

    def after_commit(self, tasks: Iterable[Any], written: Written, *, force: bool = False) -> None:
        """Publish the ranges of ``tasks`` (:class:`~platform_streams.runtime.tasks.task.StreamTask`:
        ``task_id``, ``partitions``, ``committed``, ``changelog_partitions``) after a commit.

        ``written``: what the worker's producer had acknowledged; the committed input offsets
        are the tasks' own.
        ``force`` (a clean close) publishes regardless of :data:`PUBLISH_EVERY_S`.
        """
        if self._publish is None:
            return
        now = time.monotonic()
        for task in tasks:
            with self._lock:
                instance = self._instances.get(task.task_id)
            if instance is None or instance.owner != threading.get_ident():
                continue  # another thread's instance (the task moved): that thread publishes it
            if not force and now - instance.published_at < PUBLISH_EVERY_S:
                continue
            inputs = instance.committed(task)
            if inputs is None:
                continue  # a partition never committed: no claim can be made for it
            changelogs = instance.ranges(task, written)
            if not changelogs:
                continue
            ranges = TaskRanges(inputs, changelogs)
            if ranges == instance.published:
                continue  # e.g. a clean close right after a commit that published the same
            instance.published_at, instance.published = now, ranges
            with self._lock:
                self._latest[task.task_id] = ranges
            try:
                self._publish(RANGE_KEY_PREFIX + str(task.task_id), ranges.to_json())
            except Exception as exc:  # a lost range costs only restore speed
                log.warning("could not publish the changelog ranges of task %s: %s", task.task_id, exc)

    def closed(self, task_id: TaskId, *, clean: bool) -> None:
        """The calling worker thread closed its instance of ``task_id`` (another thread's, begun
        meanwhile, is kept). After a dirty close its records may still land: another thread
        of this client that takes the task must not count them as its own first writes (a
        worker's own next instance waits for them: ``forget_first_offsets``)."""
        with self._lock:
            if not clean:
                self._dirty_closes[task_id] = (time.monotonic(), threading.get_ident())
            instance = self._instances.get(task_id)
            if instance is not None and instance.owner == threading.get_ident():
                del self._instances[task_id]


def forget_published_ranges(config: StreamsConfig, timeout_s: float = 30.0) -> int:
    """Write a tombstone for every ``range/`` record of the application's control topic;
    returns how many. For the operations that delete changelog topics but keep the control
    topic: a range names offsets, and a re-created changelog would give them other records.
    Call it only while the control topic exists."""
    # control_channel imports this module
    from platform_streams.runtime.membership.control_channel import control_topic_name

    topic = control_topic_name(config.application_id)
    reader = {**config.restore_consumer_configs(), "group.id": f"{config.application_id}-ops"}
    live: set[str] = set()
    for batch in read_partition_batches(reader, topic, 0, OFFSET_BEGINNING, timeout_s=timeout_s):
        for msg in batch:
            key = (msg.key() or b"").decode("utf-8", "replace")
            if key.startswith(RANGE_KEY_PREFIX):
                (live.add if msg.value() is not None else live.discard)(key)
    if live:
        producer = create_producer(config.producer_configs())
        for key in sorted(live):
            producer.produce(topic, None, key.encode(), partition=0)
        if producer.flush(timeout_s):
            raise StreamsTimeoutError(f"could not write the range tombstones to {topic}")
    return len(live)
