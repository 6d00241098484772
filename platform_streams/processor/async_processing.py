"""Async processors: many records' I/O in flight at once, in order per key, same guarantees.

An :class:`AsyncNode` is a processor node whose user function runs off the stream thread
(platform_streams/processor/async_runtime.py). The stream thread admits a record (the node's
``process``), the call runs, and the stream thread later *completes* it: forwards its
result downstream, applies its store writes, or hands its error to the exception handlers,
with the task's current record set to the input record the call was made for (so sinks,
changelog headers and dead letters name that record). See docs/async-processing.md.

* Per key, in order: a record whose key has a record in flight waits behind it in the node
  (``_keys``) and starts only once that one completed (its store writes applied), so the
  records of a key never overtake each other; records of other keys run concurrently.
* Bounded: ``max_in_flight`` per node and task, and a process-wide bound; the task takes no
  more input while a node is full (:meth:`TaskAsyncWork.room`), so its partition buffers
  fill and the worker pauses those partitions as for any backlog.
* Commit safety: a task's commit starts by completing everything in flight
  (:meth:`TaskAsyncWork.complete_all`, from ``StreamTask.flush_caches``), so the offsets it
  commits cover only records whose outputs were produced -- in the same transaction under
  exactly-once. A task closed without a commit (migration, abort) abandons what is in flight:
  its input was not committed and is processed again.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from platform_streams.errors import InvalidStateStoreError, ProcessorError
from platform_streams.processor.async_runtime import AsyncOptions, AsyncRuntime, Call, is_coroutine_function
from platform_streams.processor.node import NodeFailure, NodeProcessor
from platform_streams.processor.record import Headers, Record

if TYPE_CHECKING:
    from platform_streams.processor.context import NodeContext, TaskContext

__all__ = ["AsyncNode", "AsyncRecordContext", "TaskAsyncWork", "calls_in_flight", "in_flight_work"]

#: what an async node does with a completed call's result
MAP_VALUES, FILTER, FOREACH, PROCESS = "map_values", "filter", "foreach", "process"

#: how long a task whose async nodes are full waits for a completion before it returns
_FULL_WAIT_S = 0.005

#: ``(raw input record, exception)``: the task's processing/production exception handling
OnFailure = Callable[[Any, Exception], None]


class AsyncRecordContext:
    """What ``process_async``'s function gets besides the record: the record key's entry of
    each connected key-value store, and a buffered ``forward``.

    Reads see the stores as they were when the call started (read on the stream thread: no
    other record of the key was in flight then) plus this call's own writes; writes and
    forwards are applied on the stream thread when the call completes, writes first. Only the
    record's own key is reachable: that is what per-key ordering keeps consistent (a range
    scan or another key could be changed by a record in flight at the same time).
    """

    __slots__ = ("_done", "_read", "_writes", "forwarded", "record")

    def __init__(self, record: Record, read: dict[str, Any]) -> None:
        self.record = record
        self._read = read
        #: store name -> (value, deleted)
        self._writes: dict[str, tuple[Any, bool]] = {}
        #: (record, child name or None), in the order forwarded
        self.forwarded: list[tuple[Record, str | None]] = []
        self._done = False

    def _store(self, name: str) -> None:
        if self._done:
            raise InvalidStateStoreError("an async processor's context is used after its call returned")
        if name not in self._read:
            raise InvalidStateStoreError(
                f"store {name!r} is not connected to this async processor "
                f"(connected: {sorted(self._read)}); pass its name to process_async"
            )

    def get(self, store: str) -> Any:
        """The record key's value in ``store`` (None if absent)."""
        self._store(store)
        written = self._writes.get(store)
        if written is not None:
            return None if written[1] else written[0]
        return self._read[store]

    def put(self, store: str, value: Any) -> None:
        """Set the record key's value in ``store`` (applied when the call completes)."""
        self._store(store)
        self._writes[store] = (value, False)

    def delete(self, store: str) -> None:
        """Delete the record key from ``store`` (applied when the call completes)."""
        self._store(store)
        self._writes[store] = (None, True)

    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` downstream when the call completes (all children, or one)."""
        if self._done:
            raise InvalidStateStoreError("an async processor's context is used after its call returned")
        self.forwarded.append((record, child_name))


class _Job(Call):
    """A record admitted by a node: the call made for it and what completing it needs."""

    __slots__ = ("context", "headers", "key", "msg", "timestamp", "token", "value")

    def __init__(
        self, node: AsyncNode, key: Any, value: Any, timestamp: int, headers: Headers, msg: Any
    ) -> None:
        super().__init__(node.fn, (), node.finished, time.perf_counter())
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers
        self.msg = msg
        self.token = _token(key)
        self.context: AsyncRecordContext | None = None


def _token(key: Any) -> Any:
    """What records of one key share in the per-key queues (the key itself where hashable)."""
    try:
        hash(key)
    except TypeError:
        return ("unhashable", repr(key))
    return key


class TaskAsyncWork:
    """The async nodes of one task: their room, their completions, their drain."""

    def __init__(self) -> None:
        self.nodes: list[AsyncNode] = []
        #: set by a finished call while the stream thread waits for one (:meth:`wait`)
        self.signal = threading.Event()
        self.waiting = False
        self.on_failure: OnFailure | None = None
        self.on_node_failure: NodeFailure | None = None

    @property
    def in_flight(self) -> int:
        return sum(node.in_flight for node in self.nodes)

    def bind(self, on_failure: OnFailure, on_node_failure: NodeFailure) -> None:
        """The task's exception handling, for completions (a call failed, a forward raised)."""
        self.on_failure, self.on_node_failure = on_failure, on_node_failure

    def pump(self) -> int:
        """Complete every finished call (stream thread); returns how many."""
        return sum(node.pump() for node in self.nodes)

    def room(self, max_records: int) -> int:
        """Complete what finished, then how many input records the task may take now: none
        while a node is full (one at least when nothing of the task is in flight, so a process
        bound filled by other tasks never stops this one for good)."""
        self.pump()
        room = self._room()
        if room <= 0:
            # full: wait a moment for a completion rather than have the worker loop spin (it
            # would take the GIL from the threads whose calls are to complete)
            self.wait(_FULL_WAIT_S)
            self.pump()
            room = self._room()
        return max(0, min(max_records, room))

    def _room(self) -> int:
        nodes = self.nodes
        room = min([AsyncRuntime.shared().room(), *(n.options.max_in_flight - n.in_flight for n in nodes)])
        return 1 if room <= 0 and self.in_flight == 0 else room

    def complete_all(self) -> int:
        """Wait for every call in flight and complete it (a commit's first step); returns how
        many completed. Each call ends within its timeout and retries, so this ends too."""
        done = 0
        while True:
            done += self.pump()
            if self.in_flight == 0:
                return done
            self.wait(1.0)

    def wait(self, timeout_s: float) -> None:
        """Wait (stream thread) until a call finishes, or ``timeout_s``. Finished calls signal
        only while someone waits: setting the event per call cost the loop thread 7 % of its
        time (bench/async_io.py). The flag is raised before the finished queues are looked at,
        so a call finishing in between either is seen there or sees the flag."""
        signal = self.signal
        signal.clear()
        self.waiting = True
        try:
            if not any(node.has_finished for node in self.nodes):
                signal.wait(timeout_s)
        finally:
            self.waiting = False

    def notify(self) -> None:
        """A call finished (loop thread)."""
        if self.waiting:
            self.signal.set()


#: task context -> its async nodes (tasks without async nodes have no entry)
_WORK: weakref.WeakKeyDictionary[TaskContext, TaskAsyncWork] = weakref.WeakKeyDictionary()


def in_flight_work(task: TaskContext) -> TaskAsyncWork | None:
    """The async work of the task ``task`` is the context of, None when it has no async node."""
    return _WORK.get(task)


def calls_in_flight(tasks: Iterable[Any]) -> bool:
    """Any of ``tasks`` (stream tasks) has async calls in flight."""
    for task in tasks:
        work = _WORK.get(task.context)
        if work is not None and work.in_flight:
            return True
    return False


class AsyncNode(NodeProcessor):
    """Runs ``fn`` for each record off the stream thread; see the module docstring.

    ``kind``: MAP_VALUES forwards ``(key, fn(...))``, FILTER forwards the record when
    ``fn(...)`` is true, FOREACH forwards nothing, PROCESS calls ``fn(record, ctx)`` with an
    :class:`AsyncRecordContext` and forwards what it forwarded. ``with_key``: MAP_VALUES,
    FILTER and FOREACH call ``fn(key, value)`` instead of ``fn(value)``.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        kind: str,
        options: AsyncOptions | None = None,
        *,
        with_key: bool = False,
        store_names: tuple[str, ...] = (),
    ) -> None:
        self.fn = fn
        self.kind = kind
        self.options = options or AsyncOptions()
        self.with_key = with_key
        self.store_names = store_names
        self.is_async = is_coroutine_function(fn)
        self.in_flight = 0
        #: key token -> records of that key waiting behind the one in flight
        self._keys: dict[Any, deque[_Job]] = {}
        self._finished: deque[_Job] = deque()
        self._lock = threading.Lock()
        self._closed = False

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self.name = context.node_name
        self.task = context.task
        work = _WORK.get(context.task)
        if work is None:
            work = _WORK[context.task] = TaskAsyncWork()
        work.nodes.append(self)
        self.work = work
        self.stores: dict[str, Any] = {name: context.get_state_store(name) for name in self.store_names}
        self.runtime = AsyncRuntime.shared()
        self.runtime.configure(self.options)

    @property
    def has_finished(self) -> bool:
        """Calls ended and not completed yet."""
        return bool(self._finished)

    # -- stream thread ---------------------------------------------------------------------

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if self.in_flight >= self.options.max_in_flight:
            self._wait_for_room()  # more records than admitted reached the node (a flat_map above)
        job = _Job(self, key, value, timestamp, headers, self.task.current)
        self.in_flight += 1
        self.runtime.acquire()
        waiting = self._keys.get(job.token)
        if waiting is None:
            self._keys[job.token] = deque()
            self._start(job)
        else:
            waiting.append(job)

    def _wait_for_room(self) -> None:
        while self.in_flight >= self.options.max_in_flight:
            if not self.pump():
                self.work.wait(1.0)

    def _start(self, job: _Job) -> None:
        kind = self.kind
        if kind == PROCESS:
            key = job.key
            read = {name: store.get(key) for name, store in self.stores.items()}
            job.context = AsyncRecordContext(Record(key, job.value, job.timestamp, job.headers), read)
            job.args = (job.context.record, job.context)
        else:
            job.args = (job.key, job.value) if self.with_key else (job.value,)
        self.runtime.submit(job, self.options, self.is_async)

    def pump(self) -> int:
        """Complete the finished calls (forward, write, or hand errors to the handlers)."""
        finished = self._finished
        done = 0
        while finished:
            job = finished.popleft()
            try:
                self._complete(job)
            finally:
                done += 1
                self.in_flight -= 1
                self.runtime.release()
                waiting = self._keys[job.token]
                if waiting:
                    self._start(waiting.popleft())
                else:
                    del self._keys[job.token]
        return done

    def _complete(self, job: _Job) -> None:
        task = self.task
        previous, task.current = task.current, job.msg
        # a store written downstream logs its change with this record's time, not the time of
        # the record the stream thread processed last (change_logging.change_time)
        previous_time, task.record_time = task.record_time, job.timestamp
        try:
            if job.error is not None:
                self._failed(job)
                return
            try:
                self._emit(job)
            except Exception as exc:
                on_failure = self.work.on_failure
                if on_failure is None:
                    raise
                on_failure(job.msg, exc)
        finally:
            task.current, task.record_time = previous, previous_time

    def _failed(self, job: _Job) -> None:
        """The call kept failing: the processing exception handler decides for this node (skip
        the record, dead-letter it, or stop the task naming the node)."""
        error = job.error
        assert error is not None
        if not isinstance(error, Exception):
            raise error
        on_node_failure = self.work.on_node_failure
        if on_node_failure is None or on_node_failure(error, self.name):
            if isinstance(error, ProcessorError):
                raise error
            msg = job.msg  # a misuse of the context (a store it was not given): stop, naming the node
            raise ProcessorError(
                f"{type(error).__name__}: {error}",
                node=self.name,
                task_id=str(self.task.task_id),
                topic=None if msg is None else msg.topic(),
                partition=None if msg is None else msg.partition(),
                offset=None if msg is None else msg.offset(),
            ) from error

    def _emit(self, job: _Job) -> None:
        kind = self.kind
        if kind == MAP_VALUES:
            self.forward(job.key, job.result, job.timestamp, job.headers)
        elif kind == FILTER:
            if job.result:
                self.forward(job.key, job.value, job.timestamp, job.headers)
        elif kind == PROCESS:
            ctx = job.context
            assert ctx is not None
            ctx._done = True
            for name, (value, deleted) in ctx._writes.items():
                store = self.stores[name]
                if deleted:
                    store.delete(job.key)
                else:
                    store.put(job.key, value)
            forward = self.context.forward
            for record, child in ctx.forwarded:
                forward(record, child)

    def close(self) -> None:
        """Abandon what is in flight: a task closes this way only after a commit completed
        everything, or when its uncommitted input will be processed again anyway."""
        with self._lock:
            self._closed = True
            abandoned = len(self._finished) + sum(len(waiting) for waiting in self._keys.values())
            self._finished.clear()
            self._keys.clear()
        # waiting records never started; finished ones were not completed; running calls
        # release their share of the process bound when they end (``finished``)
        for _ in range(abandoned):
            self.runtime.release()
        self.in_flight = 0

    # -- loop thread -----------------------------------------------------------------------

    def finished(self, call: Call) -> None:
        """A call ended (loop thread): queue it for the stream thread, or drop it after close."""
        with self._lock:
            if not self._closed:
                assert isinstance(call, _Job)
                self._finished.append(call)
                self.work.notify()
                return
        self.runtime.release()

