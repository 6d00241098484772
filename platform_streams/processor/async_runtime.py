"""Where async processors' calls run: one event loop thread and one bounded thread pool per process.

An async processor's user function is either an ``async def`` (awaited on the loop) or a
blocking function (run in the pool, awaited from the loop). Either way one coroutine per
record wraps the call with its timeout and retries (:meth:`AsyncRuntime.submit`); what it
ends with (a result or the last error) goes back to the stream thread, which alone forwards
results and touches stores (platform_streams/processor/async_processing.py).

The process-wide in-flight count bounds all async processors of the process together
(every task, every worker), as ``max_in_flight`` of each node bounds one node in one task.
Statistics (in flight, queue wait, call latency, completions, failures) are plain counters
and :class:`Durations` that the metrics collector reads at scrape time.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

__all__ = ["AsyncOptions", "AsyncRuntime", "AsyncStats", "Call", "Durations", "is_coroutine_function"]

#: seconds: an I/O call (a local cache's ~1 ms to a model's tens of seconds)
DURATION_BOUNDS_S: tuple[float, ...] = (
    0.001, 0.002_5, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

#: how often (at most) the watchdog looks for calls past their deadline, seconds
_WATCH_S = 0.05

#: the process-wide bound on records in flight when no node asks for less
DEFAULT_PROCESS_MAX_IN_FLIGHT = 10_000


@dataclass(frozen=True)
class AsyncOptions:
    """How one async processor runs its calls.

    ``max_in_flight``: records this node holds at once in one task (running, or waiting behind
    a record of the same key); the task takes no more input records while it is full, so the
    partition buffers fill and the consumer pauses those partitions. ``process_max_in_flight``:
    the bound over every async node of the process (the smallest asked for wins).
    ``timeout_s`` bounds each attempt; ``retries`` more attempts follow a failed or timed-out
    one after ``retry_backoff_s`` (doubling); then the processing exception handler decides
    (log and continue / dead-letter topic, or fail). ``threads``: the size of the process's
    pool for blocking functions (the largest asked for wins; it only grows).
    """

    max_in_flight: int = 256
    process_max_in_flight: int = DEFAULT_PROCESS_MAX_IN_FLIGHT
    timeout_s: float = 30.0
    retries: int = 0
    retry_backoff_s: float = 0.1
    threads: int = 64

    def __post_init__(self) -> None:
        for name in ("max_in_flight", "process_max_in_flight", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"AsyncOptions.{name} must be at least 1, got {getattr(self, name)}")
        if self.retries < 0:
            raise ValueError(f"AsyncOptions.retries must be 0 or more, got {self.retries}")
        if self.timeout_s <= 0:
            raise ValueError(f"AsyncOptions.timeout_s must be positive, got {self.timeout_s}")


def is_coroutine_function(fn: Any) -> bool:
    """``fn`` (or the ``__call__`` of an object) is an ``async def``."""
    call = type(fn).__call__ if callable(fn) and not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class Durations:
    """Counts of durations per bucket of :data:`DURATION_BOUNDS_S` (the last: above them all) and
    their sum; one writer thread. The metrics package exports them as a histogram (the
    processor layer does not import it: it sits below the runtime, which the metrics observe)."""

    __slots__ = ("counts", "sum")

    bounds = DURATION_BOUNDS_S

    def __init__(self) -> None:
        self.counts = [0] * (len(DURATION_BOUNDS_S) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(DURATION_BOUNDS_S, seconds)] += 1
        self.sum += seconds


class AsyncStats:
    """What the process's async processors did; written by the loop thread only, read by a scrape."""

    def __init__(self) -> None:
        self.completed = 0
        self.failed = 0
        self.retried = 0
        self.timed_out = 0
        #: seconds from a record's arrival at the node to its call's start (per-key waits)
        self.queue_wait = Durations()
        #: seconds of one call, all its attempts included
        self.call_latency = Durations()


class Call:
    """One record's call: what the loop thread runs and hands back."""

    __slots__ = ("admitted", "args", "done", "error", "fn", "result")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], done: Callable[[Call], None], admitted: float
    ) -> None:
        self.fn = fn
        self.args = args
        self.done = done
        #: ``perf_counter()`` when the record reached the node (its queue wait starts)
        self.admitted = admitted
        self.result: Any = None
        self.error: BaseException | None = None


class AsyncRuntime:
    """The process's event loop thread, its thread pool and its in-flight bound."""

    _shared: AsyncRuntime | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._threads = 0
        self._pool: ThreadPoolExecutor | None = None
        self.max_in_flight = DEFAULT_PROCESS_MAX_IN_FLIGHT
        self._in_flight = 0
        self._lock = threading.Lock()
        self.stats = AsyncStats()
        #: calls queued for the loop (any thread appends, the loop thread takes)
        self._submitted: deque[tuple[Call, AsyncOptions, bool]] = deque()
        self._wake_scheduled = False
        #: the attempts running, by deadline (loop thread only; see ``_expire``)
        self._deadlines: list[_Deadline] = []
        self._watch_armed = False
        thread = threading.Thread(target=self._run, name="platform-streams-async", daemon=True)
        thread.start()

    @classmethod
    def shared(cls) -> AsyncRuntime:
        """The process's runtime, started on first use."""
        runtime = cls._shared
        if runtime is None:
            with cls._shared_lock:
                runtime = cls._shared
                if runtime is None:
                    runtime = cls._shared = AsyncRuntime()
        return runtime

    @classmethod
    def current(cls) -> AsyncRuntime | None:
        """The process's runtime if one was started (the metrics never start one)."""
        return cls._shared

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def configure(self, options: AsyncOptions) -> None:
        """A node with ``options`` joins: the process bound is the smallest asked for, the pool
        the largest."""
        with self._lock:
            self.max_in_flight = min(self.max_in_flight, options.process_max_in_flight)
            if options.threads > self._threads:
                old, self._threads = self._pool, options.threads
                self._pool = ThreadPoolExecutor(options.threads, thread_name_prefix="platform-streams-async")
                if old is not None:
                    old.shutdown(wait=False)

    # -- the process-wide bound ------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def room(self) -> int:
        return self.max_in_flight - self._in_flight

    def acquire(self) -> None:
        with self._lock:
            self._in_flight += 1

    def release(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # -- running calls ---------------------------------------------------------------------

    def submit(self, call: Call, options: AsyncOptions, is_async: bool) -> None:
        """Run ``call`` (from any thread); ``call.done(call)`` runs on the loop thread when it ended.

        Calls are queued and the loop is woken once per batch, not once per call: a wake-up is
        a write to the loop's self-pipe, and waking it per record cost a fifth of the stream
        thread's time per record (bench/async_io.py)."""
        self._submitted.append((call, options, is_async))
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self.loop.call_soon_threadsafe(self._start_submitted)

    def _start_submitted(self) -> None:
        # reset before draining: a call queued after the reset schedules another wake-up
        self._wake_scheduled = False
        submitted, create_task, attempts = self._submitted, self.loop.create_task, self._attempts
        while submitted:
            create_task(attempts(*submitted.popleft()))

    async def _attempts(self, call: Call, options: AsyncOptions, is_async: bool) -> None:
        started = time.perf_counter()
        stats = self.stats  # written here only, on the loop thread
        stats.queue_wait.observe(started - call.admitted)
        task = asyncio.current_task()
        assert task is not None
        try:
            for attempt in range(options.retries + 1):
                try:
                    deadline = _Deadline(self.loop.time() + options.timeout_s, task)
                    self._watch(deadline)
                    try:
                        if is_async:
                            call.result = await call.fn(*call.args)
                        else:
                            call.result = await self.loop.run_in_executor(self._pool, call.fn, *call.args)
                    except asyncio.CancelledError:
                        if not deadline.expired:
                            raise
                        task.uncancel()
                        raise TimeoutError(f"the call took longer than {options.timeout_s} s") from None
                    finally:
                        deadline.live = False
                    call.error = None
                    break
                except Exception as exc:
                    call.error = exc
                    if isinstance(exc, TimeoutError):
                        stats.timed_out += 1
                    if attempt < options.retries:
                        stats.retried += 1
                        await asyncio.sleep(options.retry_backoff_s * (2**attempt))
        finally:
            stats.call_latency.observe(time.perf_counter() - started)
            if call.error is None:
                stats.completed += 1
            else:
                stats.failed += 1
            call.done(call)

    # -- timeouts ------------------------------------------------------------------------------
    # One watchdog cancels the calls past their deadline, instead of asyncio.timeout per call:
    # that arms and cancels a timer handle per call, a sixth of the loop thread's time a call
    # at thousands of calls a second (bench/async_io.py). Calls mostly end in the order they
    # start, so the heap's top is mostly ended calls, dropped at each check.

    def _watch(self, deadline: _Deadline) -> None:
        heapq.heappush(self._deadlines, deadline)
        if not self._watch_armed:
            self._watch_armed = True
            self.loop.call_later(min(_WATCH_S, deadline.at - self.loop.time()), self._expire)

    def _expire(self) -> None:
        deadlines, now = self._deadlines, self.loop.time()
        while deadlines and (not deadlines[0].live or deadlines[0].at <= now):
            deadline = heapq.heappop(deadlines)
            if deadline.live:
                deadline.expired = True
                deadline.task.cancel()
        if deadlines:
            self.loop.call_later(min(_WATCH_S, max(0.0, deadlines[0].at - now)), self._expire)
        else:
            self._watch_armed = False


class _Deadline:
    """When one attempt of a call times out, and whether it still runs."""

    __slots__ = ("at", "expired", "live", "task")

    def __init__(self, at: float, task: asyncio.Task[Any]) -> None:
        self.at = at
        self.task = task
        self.live = True
        self.expired = False

    def __lt__(self, other: _Deadline) -> bool:
        return self.at < other.at
