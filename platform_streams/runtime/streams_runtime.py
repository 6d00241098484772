"""``StreamsRuntime``: the core of a client that runs a topology (lifecycle, workers, listeners).

It knows nothing of metrics, interactive queries or the HTTP endpoint: those are
:class:`~platform_streams.runtime.api.ClientAddOn` s that the composed client
(:class:`platform_streams.kafka_streams.KafkaStreams`) builds with this object as their
:class:`~platform_streams.runtime.api.RuntimeView` and appends to :attr:`add_ons`.
"""

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
from platform_streams.runtime.api import ClientAddOn, WorkerState
from platform_streams.runtime.broker_features import (
    broker_may_skip_batches,
    commits_offsets_in_empty_transactions,
    membership_check_topic,
    sends_eagerly,
)
from platform_streams.runtime.internal_topics import prepare_topics
from platform_streams.runtime.lifecycle import State, StreamsUncaughtExceptionResponse
from platform_streams.runtime.membership.client_membership import ClientMembership
from platform_streams.runtime.membership.pattern_refresh import (
    PatternRefresher,
    subscribe_patterns,
    uses_patterns,
)
from platform_streams.runtime.observer import GuardReleasingListener
from platform_streams.runtime.restore.standby import StandbyUpdater
from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator
from platform_streams.runtime.workers.global_worker import GlobalStreamWorker
from platform_streams.runtime.workers.global_worker import bootstrap as bootstrap_global_stores
from platform_streams.runtime.workers.worker import StreamWorker
from platform_streams.runtime.workers.worker_streams_group import StreamsGroupSettings, streams_group_settings
from platform_streams.state.dsl_store_suppliers import apply_dsl_store_config
from platform_streams.state.private_files import app_state_dir
from platform_streams.state.restore import StateRestoreListener
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


class StreamsRuntime:
    """Runs a topology with ``num_stream_threads`` workers; ``start()`` returns at once."""

    def __init__(self, topology: Topology | Any, config: StreamsConfig | Mapping[str, Any]) -> None:
        self.config = config if isinstance(config, StreamsConfig) else StreamsConfig(**dict(config))
        if not isinstance(topology, Topology) and hasattr(topology, "build"):
            # a StreamsBuilder: build with the config so topology_optimization applies
            topology = topology.build(self.config)
        self.topology: Topology = topology
        apply_dsl_store_config(topology, self.config)
        self.plan: TopologyPlan = compile_topology(topology)
        self._state = State.CREATED
        self._lock = threading.RLock()
        #: one restart_workers() at a time: two at once would stop the same workers and each
        #: try to replace them
        self._restart_lock = threading.Lock()
        self._state_changed = threading.Condition(self._lock)
        self._listener: StateListener | None = None
        self._exception_handler: UncaughtExceptionHandler | None = None
        self._restore_listener: StateRestoreListener | None = None
        self.workers: list[StreamWorker] = []
        self.partition_counts: dict[str, int] = {}
        #: where EOS workers prove membership before committing (None: the broker fences; see
        #: runtime/broker_features.py)
        self._membership_check_topic: str | None = None
        #: group_protocol="streams": what each worker sends its streams group (None: classic)
        self._streams_group: StreamsGroupSettings | None = None
        self._eager_sends = False
        self._offsets_alone_in_transactions = True
        self._next_worker_index = 0
        self._paused = False
        #: lists the topics regex sources match every metadata.max.age.ms (None: no patterns)
        self._pattern_refresher: PatternRefresher | None = None
        #: global stores' bootstrap/tail thread (None when the topology has no global stores)
        self.global_worker: GlobalStreamWorker | None = None
        #: what the composed client plugs in (metrics, interactive queries), see runtime/api.py
        self.add_ons: list[ClientAddOn] = []
        #: identity, control channel (heartbeats, SHUTDOWN_APPLICATION) and standby tasks
        self.membership = ClientMembership(
            self.plan,
            self.config,
            local_active=self._local_active_tasks,
            on_shutdown_request=self._on_application_shutdown,
        )

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

    def set_global_state_restore_listener(self, listener: StateRestoreListener) -> None:
        """Restore progress callbacks for every store of this client (set before start)."""
        self._require(State.CREATED, "set_global_state_restore_listener")
        self._restore_listener = listener

    def start(self) -> None:
        """Create internal topics, start the workers and return; processing runs in the background.

        Raises MissingSourceTopicError/TopologyError synchronously (the client then is in ERROR).
        """
        self._require(State.CREATED, "start")
        self._transition(State.REBALANCING)
        try:
            if uses_patterns(self.plan):
                subscribe_patterns(self.plan, self.config)
                self._pattern_refresher = PatternRefresher(self.plan, self.config, self._on_pattern_topics)
            self.partition_counts = prepare_topics(self.plan, self.config)
            self.membership.start(self.partition_counts)
            self._membership_check_topic = membership_check_topic(self.config, self.membership.control_topic)
            self._streams_group = streams_group_settings(
                self.plan,
                self.config,
                self.membership.process_id,
                self._on_application_shutdown,
                self.membership.set_broker_standbys,
            )
            if self._streams_group is not None:  # the broker checks the member epoch on every commit
                self._membership_check_topic = None
            self._eager_sends = sends_eagerly(self.config)
            self._offsets_alone_in_transactions = commits_offsets_in_empty_transactions(self.config)
            broker_may_skip_batches(self.config)  # probed now: readers ask the answer, never the broker
            self.global_worker = bootstrap_global_stores(
                self.config, self.plan, self.partition_counts, on_failure=self._on_global_failure
            )
            self._start_serving()
        except BaseException:
            self._stop_serving(clean=False)
            self.membership.close(leave=False)
            self._transition(State.PENDING_ERROR)
            self._transition(State.ERROR)
            raise
        for _ in range(self.config.num_stream_threads):
            self._start_worker()
        if self._pattern_refresher is not None:
            self._pattern_refresher.start()

    def close(self, timeout_s: float | None = None) -> bool:
        """Stop the workers (each commits and leaves the group); True if all stopped in time."""
        with self._lock:
            if self._state in (State.NOT_RUNNING, State.ERROR, State.PENDING_SHUTDOWN, State.PENDING_ERROR):
                stopped = self._join(timeout_s)
                self._stop_serving(clean=False)
                if stopped:
                    self.membership.close()
                return stopped
            self._transition(State.PENDING_SHUTDOWN)
        stopped = self._join(timeout_s)
        with self._lock:
            if self._state is State.PENDING_SHUTDOWN:
                self._transition(State.NOT_RUNNING)
        self._stop_serving(clean=stopped)
        if stopped:
            self.membership.close()
        return stopped

    def failure(self) -> BaseException | None:
        """The first failure of a worker, None if none failed.

        Also set when a worker failed while the client was already stopping (its last
        commit could not be written): the client then ends NOT_RUNNING, not ERROR, but it
        did not stop cleanly -- a command line must not report success.
        """
        failed = next((w.failure for w in self.workers if w.failure is not None), None)
        return failed if failed is not None else self.membership.denied()

    def cleanup(self) -> None:
        """Delete this application's local state directory (only while not running)."""
        if self._state.is_running_or_rebalancing() or self._state is State.PENDING_SHUTDOWN:
            raise IllegalStateError("cleanup() is only allowed before start() or after close()")
        app_dir = app_state_dir(Path(self.config.state_dir), self.config.application_id)
        shutil.rmtree(app_dir, ignore_errors=True)

    def wait_for_state(self, *states: State, timeout_s: float = 60.0) -> State:
        """Block until the client is in one of ``states`` (handy in tests and scripts)."""
        deadline = time.monotonic() + timeout_s
        with self._state_changed:
            while self._state not in states:
                if self._state in (State.ERROR, State.NOT_RUNNING):
                    failure = self.failure()
                    raise StreamsStateError(
                        f"the client is {self._state.value}, it will not reach {[s.value for s in states]}"
                        + (f": {failure!r}" if failure is not None else "")
                    ) from failure
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

    def local_standby_tasks(self) -> list[str]:
        """The standby tasks this client keeps now (placed by the client or by a streams group)."""
        standbys = self.membership.standbys
        return sorted(str(t) for t in standbys.standby_ids()) if standbys is not None else []

    def pause(self) -> None:
        """Stop processing (Kafka Streams' ``pause()``): workers stay in the group and keep
        their partitions, so ``resume()`` continues where they stopped, with no rebalance."""
        self._paused = True
        for worker in list(self.workers):
            worker.pause_requested = True

    def resume(self) -> None:
        """Continue processing after :meth:`pause`."""
        self._paused = False
        for worker in list(self.workers):
            worker.pause_requested = False

    def is_paused(self) -> bool:
        return self._paused

    def restart_workers(self, timeout_s: float = 60.0) -> bool:
        """Replace every stream worker with a fresh one (each old one commits and leaves).

        What a Connect-style ``restart`` does for a running client: tasks are closed and
        re-created, state is restored from the local stores and changelogs. Returns False
        if an old worker did not stop within ``timeout_s`` (it is then left to finish).
        Concurrent calls run one after the other, each replacing the workers it found.
        """
        with self._restart_lock:
            with self._lock:
                if not self._state.is_running_or_rebalancing():
                    raise IllegalStateError(
                        f"restart_workers() needs a running client, not {self._state.value}"
                    )
                old = list(self.workers)
            for worker in old:
                worker.shutdown()
            deadline = time.monotonic() + timeout_s
            for worker in old:
                worker.join(max(0.0, deadline - time.monotonic()))
            stopped = not any(w.is_alive() for w in old)
            with self._lock:
                if not self._state.is_running_or_rebalancing():
                    return stopped
                for worker in old:
                    self.workers.remove(worker)
                self._transition(State.REBALANCING)
                for _ in old:
                    self._start_worker()
            return stopped

    @property
    def standbys(self) -> StandbyUpdater | None:
        """The standby tasks' updater (``num_standby_replicas`` > 0, or a streams group), None without."""
        return self.membership.standbys

    @property
    def coordinator(self) -> AssignmentCoordinator | None:
        """This client's state-aware task assignor (None before start)."""
        return self.membership.coordinator

    def __enter__(self) -> StreamsRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _start_worker(self, index: int | None = None) -> None:
        """Start a worker; a replacement reuses the failed one's index, hence its transactional.id."""
        if index is None:
            index = self._next_worker_index
            self._next_worker_index += 1
        worker = StreamWorker(
            index,
            self.plan,
            self.config,
            partition_counts=self.partition_counts,
            on_state_change=self._on_worker_state,
            on_failure=self._on_worker_failure,
            transactional_id=self.membership.transactional_id(index),
            standbys=self.membership.standbys,
            control_topic=self._membership_check_topic,
            coordinator=self.membership.coordinator,
            eager_sends=self._eager_sends,
            offsets_alone_in_transactions=self._offsets_alone_in_transactions,
            restore_ranges=self.membership.restore_ranges,
            streams_group=self._streams_group,
        )
        worker.pause_requested = self._paused
        for add_on in self.add_ons:
            add_on.attach_worker(worker)
        if self._restore_listener is not None:
            worker.add_restore_listener(GuardReleasingListener(self._restore_listener, worker.store_guard))
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

    def _start_serving(self) -> None:
        """Start what serves this client to others (the composed client's HTTP endpoint and
        instance directory); nothing here."""

    def _on_pattern_topics(self) -> None:
        """Pattern sources match other topics now: size the new topics' tasks and restart the
        workers, whose new subscription is the rebalance (runtime/membership/pattern_refresh.py)."""
        self.partition_counts.update(prepare_topics(self.plan, self.config))
        coordinator = self.membership.coordinator
        if coordinator is not None:
            coordinator.start(self.partition_counts)
        if self._state.is_running_or_rebalancing():
            self.restart_workers()

    def _stop_serving(self, *, clean: bool) -> None:
        if self._pattern_refresher is not None:
            self._pattern_refresher.stop()
        for add_on in self.add_ons:
            add_on.close(clean=clean)

    def _on_worker_state(self, worker: StreamWorker, state: WorkerState) -> None:
        if state in (WorkerState.RUNNING, WorkerState.PARTITIONS_REVOKED, WorkerState.DEAD):
            self.membership.on_local_tasks_changed()
        for add_on in self.add_ons:
            add_on.on_worker_state(worker, state)
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
        # a failed worker's streams-group member waits for this answer: SHUTDOWN_APPLICATION
        # reaches the group's other members (Java ones too) through it
        worker.leave_streams_group(
            shutdown_application=response is StreamsUncaughtExceptionResponse.SHUTDOWN_APPLICATION
        )
        with self._lock:
            if not self._state.is_running_or_rebalancing():
                return
            if response is StreamsUncaughtExceptionResponse.REPLACE_WORKER:
                log.warning("replacing failed worker %s", worker.name)
                self.workers.remove(worker)
                self._start_worker(worker.index)
                return
            if response is StreamsUncaughtExceptionResponse.SHUTDOWN_APPLICATION:
                log.error("SHUTDOWN_APPLICATION: asking every instance of the application to stop")
                self.membership.request_application_shutdown(f"{worker.name} failed: {exc!r}")
            self._transition(State.PENDING_ERROR)
        self._begin_error_shutdown()

    def _on_application_shutdown(self, requested_by: str) -> None:
        """Another instance (or this one) asked the whole application to shut down."""
        with self._lock:
            if not self._state.is_running_or_rebalancing():
                return
            log.error("shutting down: SHUTDOWN_APPLICATION requested by %s", requested_by)
            self._transition(State.PENDING_ERROR)
        self._begin_error_shutdown()

    def _local_active_tasks(self) -> set[Any]:
        return {task_id for worker in list(self.workers) for task_id in list(worker.tasks)}

    def _begin_error_shutdown(self) -> None:
        """Stop the workers from a separate thread (a failing worker cannot join itself)."""
        thread = threading.Thread(
            target=self._shutdown_after_error, name="streams-error-shutdown", daemon=True
        )
        thread.start()

    def _shutdown_after_error(self) -> None:
        self._join(None)
        self.membership.close()
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
