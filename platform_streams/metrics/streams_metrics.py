"""``StreamsMetrics``: one client's metrics registry, recorders and exposition.

Each :class:`KafkaStreams` gets its own ``CollectorRegistry`` (not prometheus_client's
global one), so several clients in one process -- tests, or an application running two
topologies -- never collide, and the worker HTTP endpoint serves exactly its client's
metrics plus the process collectors (CPU, memory, file descriptors). With several worker
*processes* on one host each serves its own registry on its own port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from platform_streams.metrics.catalog import Level
from platform_streams.metrics.prometheus_collector import StreamsCollector
from platform_streams.metrics.recorders import ThreadRecorder
from platform_streams.runtime.api import ClientAddOn, RuntimeView, WorkerState, WorkerView

if TYPE_CHECKING:
    from platform_streams.query.service import InteractiveQueries

__all__ = ["StreamsMetrics"]


class StreamsMetrics(ClientAddOn):
    """The metrics of one client: attach workers, follow their states, render for scrapes.

    ``queries`` (optional) is the client's query side, whose key-placement checks and
    scatter-gather counts are exported too.
    """

    def __init__(self, streams: RuntimeView, queries: InteractiveQueries | None = None) -> None:
        self.streams = streams
        self.queries = queries
        self.level = Level.parse(streams.config.metrics_recording_level)
        #: thread id -> recorder (dead workers keep theirs: their last values stay visible)
        self.threads: dict[str, ThreadRecorder] = {}
        self.failed_threads = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StreamsCollector(self))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def attach_worker(self, worker: WorkerView) -> ThreadRecorder:
        """Record ``worker``'s loop, commits, restores and tasks (before it starts)."""
        recorder = ThreadRecorder(worker, self.level)
        self.threads[worker.name] = recorder
        worker.add_observer(recorder)
        worker.add_restore_listener(recorder.restore)
        return recorder

    def on_worker_state(self, worker: WorkerView, state: WorkerState) -> None:
        """Called on the worker thread at each of its state changes."""
        recorder = self.threads.get(worker.name)
        if recorder is None:
            return
        recorder.sync_tasks(assigned=state is WorkerState.PARTITIONS_ASSIGNED)
        if state is WorkerState.DEAD and worker.failure is not None:
            self.failed_threads += 1

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
