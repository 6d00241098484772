"""``StoreGuard``: lets query threads read a worker's stores without racing the worker.

Stores, caches and the task table are plain Python objects that the worker thread mutates
without locks (that is what keeps the hot path fast). Interactive queries arrive on other
threads (the HTTP server, the application). The guard is one lock that the *worker holds
all the time* except while it waits in ``consumer.poll`` -- so an idle worker answers a
query at once -- plus a handoff so a busy worker lets waiting queries in:

* the worker calls :meth:`yield_point` once per loop iteration (and the restore listener
  after every restored batch): when a query is waiting it releases the lock until the
  waiting queries got it, then takes it back; when none waits the call is one attribute
  test;
* librdkafka runs rebalance callbacks inside ``poll``/``consume``; :meth:`wrap` makes a
  callback take the lock if the worker had released it for the poll;
* a query thread calls :meth:`hold` (with a timeout) around its store reads; called from
  the worker thread itself (a processor querying) it does not lock.

Measured cost on the worker: one lock release/acquire per idle poll and one attribute
test per loop iteration (see bench/metrics_overhead.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from platform_streams.errors import StreamsTimeoutError

__all__ = ["StoreGuard"]

F = TypeVar("F", bound=Callable[..., Any])

#: How long the worker waits for queued queries to take the lock before it goes on.
_HANDOFF_TIMEOUT_S = 0.5


class StoreGuard:
    """The lock between one worker thread and the query threads reading its stores."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: thread id currently holding the lock (None: free)
        self._holder: int | None = None
        self._waiting = 0
        self._changed = threading.Condition(threading.Lock())

    # ------------------------------------------------------------------ worker side

    def acquire_for_worker(self) -> None:
        """Take the lock for the worker thread (at the start of its run)."""
        self._lock.acquire()
        self._holder = threading.get_ident()

    def release_for_worker(self) -> None:
        """Give the lock back (the worker is done); no-op if this thread does not hold it."""
        if self._holder == threading.get_ident():
            self._holder = None
            self._lock.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Release the lock around a blocking wait of the worker (its idle poll)."""
        me = threading.get_ident()
        if self._holder != me:
            yield
            return
        self._holder = None
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._holder = me

    def wrap(self, callback: F) -> F:
        """``callback`` made to run with the lock held (for rebalance callbacks)."""

        def guarded(*args: Any, **kwargs: Any) -> Any:
            me = threading.get_ident()
            if self._holder == me:
                return callback(*args, **kwargs)
            self._lock.acquire()
            self._holder = me
            try:
                return callback(*args, **kwargs)
            finally:
                self._holder = None
                self._lock.release()

        return guarded  # type: ignore[return-value]

    def yield_point(self) -> None:
        """Let waiting queries run now (cheap when none waits)."""
        if not self._waiting:
            return
        me = threading.get_ident()
        if self._holder != me:
            return
        self._holder = None
        self._lock.release()
        try:
            with self._changed:
                self._changed.wait_for(lambda: self._waiting == 0, timeout=_HANDOFF_TIMEOUT_S)
        finally:
            self._lock.acquire()
            self._holder = me

    # ------------------------------------------------------------------ query side

    @contextmanager
    def hold(self, timeout_s: float) -> Iterator[None]:
        """Hold the lock while reading stores; raises StreamsTimeoutError after ``timeout_s``."""
        me = threading.get_ident()
        if self._holder == me:
            yield
            return
        with self._changed:
            self._waiting += 1
        try:
            acquired = self._lock.acquire(timeout=timeout_s)
        finally:
            with self._changed:
                self._waiting -= 1
                self._changed.notify_all()
        if not acquired:
            raise StreamsTimeoutError(f"the worker did not let the query read its stores within {timeout_s}s")
        self._holder = me
        try:
            yield
        finally:
            self._holder = None
            self._lock.release()

    @property
    def waiting(self) -> int:
        """Query threads waiting for the lock now."""
        return self._waiting
