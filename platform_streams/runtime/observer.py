"""Hooks the worker loop offers to metrics and interactive queries.

The worker calls its ``observer`` at two points -- once per loop iteration and after each
commit -- and its state lifecycle calls a :class:`StateRestoreListener` around restores.
Both default to no-ops; :class:`KafkaStreams` plugs in the metrics recorder and the query
layer (position persistence, restore tracking) through the worker's ``add_observer`` and
``add_restore_listener`` (:class:`~platform_streams.runtime.api.WorkerView`). Keeping
them behind one object each means the loop pays one method call per iteration whatever
is attached, and none per record.
"""

from __future__ import annotations

from platform_streams.runtime.store_guard import StoreGuard
from platform_streams.state.restore import StateRestoreListener

__all__ = [
    "GuardReleasingListener",
    "ObserverChain",
    "RestoreListenerChain",
    "WorkerObserver",
    "chain_observer",
    "chain_restore_listener",
]


class WorkerObserver:
    """Called on the worker thread; every method is a no-op here."""

    def on_loop(self, started: float, polled: float, polled_records: int, processed: int) -> None:
        """One loop iteration ended: ``started``/``polled`` are ``perf_counter()`` readings
        taken before and after the poll; ``processed`` records went through the tasks."""

    def on_commit(self, started: float) -> None:
        """A commit succeeded (``started`` is when it began, ``perf_counter()``)."""

    def on_client_statistics(self, client: str, document: str) -> None:
        """librdkafka statistics JSON of the worker's ``client`` (``consumer``/``producer``),
        when ``statistics.interval.ms`` is set for it."""


class ObserverChain(WorkerObserver):
    """Several observers behind one."""

    def __init__(self, observers: list[WorkerObserver]) -> None:
        self.observers = observers

    def on_loop(self, started: float, polled: float, polled_records: int, processed: int) -> None:
        for observer in self.observers:
            observer.on_loop(started, polled, polled_records, processed)

    def on_commit(self, started: float) -> None:
        for observer in self.observers:
            observer.on_commit(started)

    def on_client_statistics(self, client: str, document: str) -> None:
        for observer in self.observers:
            observer.on_client_statistics(client, document)


class RestoreListenerChain(StateRestoreListener):
    """Several restore listeners behind one."""

    def __init__(self, listeners: list[StateRestoreListener]) -> None:
        self.listeners = listeners

    def on_restore_start(
        self, store_name: str, tp: tuple[str, int], start_offset: int, end_offset_estimate: int | None
    ) -> None:
        for listener in self.listeners:
            listener.on_restore_start(store_name, tp, start_offset, end_offset_estimate)

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        for listener in self.listeners:
            listener.on_batch_restored(store_name, tp, batch_end_offset, num_restored)

    def on_restore_end(self, store_name: str, tp: tuple[str, int], total_restored: int) -> None:
        for listener in self.listeners:
            listener.on_restore_end(store_name, tp, total_restored)

    def on_log_end(self, store_name: str, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        for listener in self.listeners:
            listener.on_log_end(store_name, tp, log_start, log_end)

    def on_snapshot_restored(
        self, store_name: str, tp: tuple[str, int], snapshot_offset: int, num_records: int, seconds: float
    ) -> None:
        for listener in self.listeners:
            listener.on_snapshot_restored(store_name, tp, snapshot_offset, num_records, seconds)


class GuardReleasingListener(StateRestoreListener):
    """Calls an application's restore listener with the worker's store guard released.

    Application code must not run while holding the guard: a listener that blocks or
    queries would stall queries (or itself). Between restored batches the stores are
    consistent, so letting queries in meanwhile is safe.
    """

    def __init__(self, listener: StateRestoreListener, guard: StoreGuard) -> None:
        self.listener = listener
        self.guard = guard

    def on_restore_start(
        self, store_name: str, tp: tuple[str, int], start_offset: int, end_offset_estimate: int | None
    ) -> None:
        with self.guard.released():
            self.listener.on_restore_start(store_name, tp, start_offset, end_offset_estimate)

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        with self.guard.released():
            self.listener.on_batch_restored(store_name, tp, batch_end_offset, num_restored)

    def on_restore_end(self, store_name: str, tp: tuple[str, int], total_restored: int) -> None:
        with self.guard.released():
            self.listener.on_restore_end(store_name, tp, total_restored)

    def on_snapshot_restored(
        self, store_name: str, tp: tuple[str, int], snapshot_offset: int, num_records: int, seconds: float
    ) -> None:
        hook = getattr(self.listener, "on_snapshot_restored", None)  # may predate it, like on_log_end
        if hook is not None:
            with self.guard.released():
                hook(store_name, tp, snapshot_offset, num_records, seconds)

    def on_log_end(self, store_name: str, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        hook = getattr(self.listener, "on_log_end", None)  # an application listener may predate it
        if hook is not None:
            with self.guard.released():
                hook(store_name, tp, log_start, log_end)


def chain_observer(current: WorkerObserver, observer: WorkerObserver) -> WorkerObserver:
    """``current`` and ``observer`` behind one (the no-op default is replaced)."""
    if type(current) is WorkerObserver:
        return observer
    if isinstance(current, ObserverChain):
        current.observers.append(observer)
        return current
    return ObserverChain([current, observer])


def chain_restore_listener(
    current: StateRestoreListener | None, listener: StateRestoreListener
) -> StateRestoreListener:
    """``current`` and ``listener`` behind one."""
    if current is None:
        return listener
    if isinstance(current, RestoreListenerChain):
        current.listeners.append(listener)
        return current
    return RestoreListenerChain([current, listener])
