"""``KafkaStreams``: the client that runs a topology (lifecycle, workers, listeners)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import IllegalStateError, StreamsStateError, StreamsTimeoutError
from platform_streams.runtime.global_worker import GlobalStreamWorker
from platform_streams.runtime.global_worker import bootstrap as bootstrap_global_stores
from platform_streams.runtime.internal_topics import prepare_topics
from platform_streams.runtime.lifecycle import State, StreamsUncaughtExceptionResponse
from platform_streams.runtime.worker import StreamWorker, WorkerState
from platform_streams.topology.compiler import TopologyPlan, compile_topology
from platform_streams.topology.topology import Topology

log = logging.getLogger(__name__)

StateListener = Callable[[State, State], None]
UncaughtExceptionHandler = Callable[[BaseException], StreamsUncaughtExceptionResponse]

_REBALANCING_WORKER_STATES = {
    WorkerState.CREATED,
    WorkerState.STARTING,
    WorkerState.PARTITIONS_ASSIGNED,
    WorkerState.PARTITIONS_REVOKED,
}


class KafkaStreams:
    """Runs a topology with ``num_stream_threads`` workers; ``start()`` returns at once."""

    def __init__(self, topology: Topology | Any, config: StreamsConfig | Mapping[str, Any]) -> None:
        self.config = config if isinstance(config, StreamsConfig) else StreamsConfig(**dict(config))
        if not isinstance(topology, Topology) and hasattr(topology, "build"):
            # a StreamsBuilder: build with the config so topology_optimization applies
            topology = topology.build(self.config)
        self.topology: Topology = topology
        self.plan: TopologyPlan = compile_topology(topology)
        self._state = State.CREATED
        self._lock = threading.RLock()
        self._state_changed = threading.Condition(self._lock)
        self._listener: StateListener | None = None
        self._exception_handler: UncaughtExceptionHandler | None = None
        self.workers: list[StreamWorker] = []
        self.partition_counts: dict[str, int] = {}
        self._next_worker_index = 0
        #: global stores' bootstrap/tail thread (None when the topology has no global stores)
        self.global_worker: GlobalStreamWorker | None = None

    # -- public API -----------------------------------------------------------------------

    def state(self) -> State:
        return self._state

    def set_state_listener(self, listener: StateListener) -> None:
        """Called as ``listener(new_state, old_state)`` on every transition (set before start)."""
        self._require(State.CREATED, "set_state_listener")
        self._listener = listener

    def set_uncaught_exception_handler(self, handler: UncaughtExceptionHandler) -> None:
        """Decide what a worker's fatal exception does (default: SHUTDOWN_CLIENT)."""
        self._require(State.CREATED, "set_uncaught_exception_handler")
        self._exception_handler = handler

    def start(self) -> None:
        """Create internal topics, start the workers and return; processing runs in the background.

        Raises MissingSourceTopicError/TopologyError synchronously (the client then is in ERROR).
        """
        self._require(State.CREATED, "start")
        self._transition(State.REBALANCING)
        try:
            self.partition_counts = prepare_topics(self.plan, self.config)
            self.global_worker = bootstrap_global_stores(
                self.config, self.plan, self.partition_counts, on_failure=self._on_global_failure
            )
        except BaseException:
            self._transition(State.PENDING_ERROR)
            self._transition(State.ERROR)
            raise
        for _ in range(self.config.num_stream_threads):
            self._start_worker()

    def close(self, timeout_s: float | None = None) -> bool:
        """Stop the workers (each commits and leaves the group); True if all stopped in time."""
        with self._lock:
            if self._state in (State.NOT_RUNNING, State.ERROR, State.PENDING_SHUTDOWN, State.PENDING_ERROR):
                return self._join(timeout_s)
            self._transition(State.PENDING_SHUTDOWN)
        stopped = self._join(timeout_s)
        with self._lock:
            if self._state is State.PENDING_SHUTDOWN:
                self._transition(State.NOT_RUNNING)
        return stopped

    def cleanup(self) -> None:
        """Delete this application's local state directory (only while not running)."""
        if self._state.is_running_or_rebalancing() or self._state is State.PENDING_SHUTDOWN:
            raise IllegalStateError("cleanup() is only allowed before start() or after close()")
        shutil.rmtree(Path(self.config.state_dir) / self.config.application_id, ignore_errors=True)

    def wait_for_state(self, *states: State, timeout_s: float = 60.0) -> State:
        """Block until the client is in one of ``states`` (handy in tests and scripts)."""
        deadline = time.monotonic() + timeout_s
        with self._state_changed:
            while self._state not in states:
                if self._state in (State.ERROR, State.NOT_RUNNING):
                    failures = [w.failure for w in self.workers if w.failure is not None]
                    raise StreamsStateError(
                        f"the client is {self._state.value}, it will not reach {[s.value for s in states]}"
                        + (f": {failures[0]!r}" if failures else "")
                    ) from (failures[0] if failures else None)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StreamsTimeoutError(
                        f"still {self._state.value} after {timeout_s}s, wanted {states}"
                    )
                self._state_changed.wait(left)
            return self._state

    def metadata_for_local_threads(self) -> list[dict[str, Any]]:
        """Each worker's name, state and active tasks (Kafka Streams' ThreadMetadata)."""
        return [
            {
                "thread_name": w.name,
                "state": w.state.value,
                "active_tasks": sorted(str(t) for t in w.tasks),
                "processed_total": w.processed_total,
            }
            for w in self.workers
        ]

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _start_worker(self) -> None:
        worker = StreamWorker(
            self._next_worker_index,
            self.plan,
            self.config,
            partition_counts=self.partition_counts,
            on_state_change=self._on_worker_state,
            on_failure=self._on_worker_failure,
        )
        self._next_worker_index += 1
        if self.global_worker is not None:
            worker.global_stores = self.global_worker.stores
        self.workers.append(worker)
        worker.start()

    def _join(self, timeout_s: float | None) -> bool:
        for worker in self.workers:
            worker.shutdown()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for worker in self.workers:
            if worker is threading.current_thread():
                continue
            worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        stopped = not any(w.is_alive() for w in self.workers if w is not threading.current_thread())
        if stopped and self.global_worker is not None:
            self.global_worker.close()
        return stopped

    def _on_global_failure(self, exc: BaseException) -> None:
        """The global thread died: tasks would read stale global state, so stop the client."""
        log.error("global stream worker failed: %s", exc)
        with self._lock:
            if not self._state.is_running_or_rebalancing():
                return
            self._transition(State.PENDING_ERROR)
        self._begin_error_shutdown()

    def _on_worker_state(self, worker: StreamWorker, state: WorkerState) -> None:
        with self._lock:
            if not self._state.is_running_or_rebalancing():
                return
            live = [w for w in self.workers if w.state is not WorkerState.DEAD]
            if live and all(w.state is WorkerState.RUNNING for w in live):
                self._transition(State.RUNNING)
            elif any(w.state in _REBALANCING_WORKER_STATES for w in live):
                self._transition(State.REBALANCING)

    def _on_worker_failure(self, worker: StreamWorker, exc: BaseException) -> None:
        response = StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
        if self._exception_handler is not None:
            try:
                response = self._exception_handler(exc)
            except Exception:
                log.exception("uncaught exception handler failed; shutting down the client")
        with self._lock:
            if not self._state.is_running_or_rebalancing():
                return
            if response is StreamsUncaughtExceptionResponse.REPLACE_WORKER:
                log.warning("replacing failed worker %s", worker.name)
                self.workers.remove(worker)
                self._start_worker()
                return
            if response is StreamsUncaughtExceptionResponse.SHUTDOWN_APPLICATION:
                log.error(
                    "SHUTDOWN_APPLICATION: shutting down this client (other instances are not signalled)"
                )
            self._transition(State.PENDING_ERROR)
        self._begin_error_shutdown()

    def _begin_error_shutdown(self) -> None:
        """Stop the workers from a separate thread (a failing worker cannot join itself)."""
        thread = threading.Thread(
            target=self._shutdown_after_error, name="streams-error-shutdown", daemon=True
        )
        thread.start()

    def _shutdown_after_error(self) -> None:
        self._join(None)
        with self._lock:
            self._transition(State.ERROR)

    def _transition(self, new: State) -> None:
        with self._lock:
            old = self._state
            if old is new:
                return
            if not old.can_transition_to(new):
                raise IllegalStateError(f"illegal state transition {old.value} -> {new.value}")
            self._state = new
            log.info("state %s -> %s", old.value, new.value)
            self._state_changed.notify_all()
        if self._listener is not None:
            try:
                self._listener(new, old)
            except Exception:
                log.exception("state listener failed")

    def _require(self, state: State, what: str) -> None:
        if self._state is not state:
            raise IllegalStateError(f"{what}() needs state {state.value}, the client is {self._state.value}")
