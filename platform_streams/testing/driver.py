"""``TopologyTestDriver``: run a topology synchronously with no broker.

The driver builds the very same :class:`~platform_streams.runtime.tasks.task.StreamTask`
objects the workers run (one per sub-topology, partition 0), feeds them records
shaped like Kafka messages, and captures what they send. Records written to a
topic the topology itself reads (repartition topics, or a user topic consumed
downstream) are fed back immediately, so multi-sub-topology topologies run end
to end. After each input record the tasks commit (stores and caches flush), as
in Kafka Streams' driver, so cached aggregations emit per record.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import TopologyError
from platform_streams.processor.record import Headers
from platform_streams.processor.record_collector import OutgoingRecord
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.tasks.task import StreamTask, start_task
from platform_streams.serde import Serde
from platform_streams.state.dsl_store_suppliers import apply_dsl_store_config
from platform_streams.state.private_files import app_state_dir
from platform_streams.testing.records import DriverRecord
from platform_streams.testing.topics import TestInputTopic, TestOutputTopic
from platform_streams.topology.compiler import compile_topology
from platform_streams.topology.nodes import pattern_token
from platform_streams.topology.topology import Topology

_DEFAULT_APP = "topology-test-driver"


#: records one piped record may cause (through repartition topics) before the driver calls it a loop
_MAX_RECORDS_PER_PIPE = 1_000_000


class _DriverCollector:
    """Captures sent records per topic and queues the ones the topology reads back."""

    def __init__(self, driver: TopologyTestDriver) -> None:
        self._driver = driver

    def send(self, *record: *OutgoingRecord) -> None:
        topic, key, value, timestamp, headers, _ = record
        self._driver.capture(topic, key, value, timestamp, headers)

    def partition_count(self, topic: str) -> int:
        return 1


class TopologyTestDriver:
    """Drives a topology with piped input, a mock wall clock and inspectable stores."""

    def __init__(
        self,
        topology: Topology,
        config: StreamsConfig | Mapping[str, Any] | None = None,
        initial_wall_clock_ms: int = 0,
    ) -> None:
        self._tmp: Path | None = None
        self.config = self._make_config(config)
        apply_dsl_store_config(topology, self.config)
        self.plan = compile_topology(topology)
        self.wall_clock_ms = initial_wall_clock_ms
        self._collector = _DriverCollector(self)
        self._outputs: dict[str, deque[DriverRecord]] = defaultdict(deque)
        self._offsets: dict[str, int] = defaultdict(int)
        self._pending: deque[DriverRecord] = deque()
        self._tasks: list[StreamTask] = []
        self._task_by_topic: dict[str, StreamTask] = {}
        # the global stores exist before the tasks, which read them from their context
        self._global = self._make_global_stores()
        state_root = app_state_dir(Path(self.config.state_dir), self.config.application_id)
        for sub in self.plan.subtopologies:
            task_id = TaskId(sub.id, 0)
            task = start_task(
                task_id, self.plan, state_root, self._global, self.config, self._collector, self._now
            )
            self._tasks.append(task)
            for topic in task.graph.sources:
                self._task_by_topic[topic] = task
        #: pattern sources read their place-holder topic; a piped topic the regex matches is
        #: queued there (Kafka's TopologyTestDriver.getInputTopicOrPatternPartition)
        self._patterns = [
            (source.pattern, pattern_token(source.pattern))
            for sub in self.plan.subtopologies
            for source in sub.sources
            if source.pattern is not None
        ]
        for task in self._tasks:
            task.initialize_processors()
            task.refresh_punctuation_flags()
        self._closed = False

    # -- topics ---------------------------------------------------------------------------

    def create_input_topic(
        self,
        name: str,
        key_serde: Serde,
        value_serde: Serde,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic:
        """A topic to pipe into; it must be a source (or global) topic of the topology."""
        if self._queue_topic(name) is None and name not in self._global_topics():
            raise TopologyError(f"unknown input topic {name!r}: the topology does not read it")
        start = self.wall_clock_ms if start_timestamp_ms is None else start_timestamp_ms
        return TestInputTopic(self, name, key_serde, value_serde, start, auto_advance_ms)

    def create_output_topic(self, name: str, key_serde: Serde, value_serde: Serde) -> TestOutputTopic:
        """A topic to read what the topology wrote (records are consumed as they are read)."""
        return TestOutputTopic(self._outputs[name], name, key_serde, value_serde)

    def produced_topic_names(self) -> set[str]:
        return {t for t, q in self._outputs.items() if q}

    # -- stores ---------------------------------------------------------------------------

    def get_state_store(self, name: str) -> Any:
        """Any store (key-value, window, session, global) by name."""
        if name in self._global:
            return self._global[name]
        for task in self._tasks:
            store = task.context.stores.get(name)
            if store is not None:
                return store
        raise KeyError(f"no state store named {name!r}")

    def get_key_value_store(self, name: str) -> Any:
        return self.get_state_store(name)

    def get_versioned_key_value_store(self, name: str) -> Any:
        """A versioned store: ``put(key, value, ts)``, ``get(key[, as_of])``, ``delete(key, ts)``."""
        store = self.get_state_store(name)
        return getattr(store, "versioned_store", store)

    def get_window_store(self, name: str) -> Any:
        return self.get_state_store(name)

    def get_session_store(self, name: str) -> Any:
        return self.get_state_store(name)

    # -- time -----------------------------------------------------------------------------

    def advance_wall_clock_time(self, ms: int) -> None:
        """Move the mock wall clock and run due wall-clock punctuators."""
        if ms < 0:
            raise ValueError("wall-clock time cannot go backwards")
        self.wall_clock_ms += ms
        for task in self._tasks:
            task.punctuate_wall_clock(self.wall_clock_ms)
            task.refresh_punctuation_flags()
        self._commit_and_drain()

    def close(self) -> None:
        """Flush and close every task; removes the driver's temporary state directory."""
        if self._closed:
            return
        self._closed = True
        try:
            self._commit_and_drain()
        finally:
            for task in self._tasks:
                task.close()
            for store in self._global.values():
                store.close()
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------------

    def pipe_raw(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Headers
    ) -> None:
        """Pipe one serialized record, process it and everything it causes downstream."""
        record = self._record(topic, key, value, timestamp_ms, headers)
        if topic in self._global_topics():
            self._update_global(record)
            return
        self._pending.append(record)
        self._commit_and_drain()

    def capture(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers
    ) -> None:
        record = self._record(topic, key, value, timestamp, headers)
        self._outputs[topic].append(record)
        if self._queue_topic(topic) is not None:
            self._pending.append(record)

    def _queue_topic(self, topic: str) -> str | None:
        """The source topic whose task queue takes records of ``topic`` (None: none reads it)."""
        if topic in self._task_by_topic:
            return topic
        return next((token for pattern, token in self._patterns if pattern.fullmatch(topic)), None)

    def _record(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers
    ) -> DriverRecord:
        offset = self._offsets[topic]
        self._offsets[topic] = offset + 1
        return DriverRecord(topic, 0, offset, key, value, timestamp, headers)

    def _commit_and_drain(self) -> None:
        """Process the pending records one at a time, each followed by a commit (stores and caches
        flushed), until nothing moves -- as Kafka's driver does (``completeAllProcessableWork``):
        a record a repartition topic feeds back is processed, and committed, on its own too."""
        for _ in range(_MAX_RECORDS_PER_PIPE):
            if self._pending:
                record = self._pending.popleft()
                queue = self._queue_topic(record.topic())
                if queue is None:
                    raise TopologyError(
                        f"unknown input topic {record.topic()!r}: the topology does not read it"
                    )
                task = self._task_by_topic[queue]
                # a task with several queues finds a record's source by the record's own topic
                task.graph.sources.setdefault(record.topic(), task.graph.sources[queue])
                task.add_records((queue, 0), [record])
                # async processors: what is in flight completes before the pipe returns
                while task.process(1_000_000) or task.complete_in_flight():
                    pass
            for task in self._tasks:
                # async processors: what punctuators or cache flushes sent them completes too
                task.complete_in_flight()
                task.flush_stores()
                while task.complete_in_flight():
                    task.flush_stores()
                task.refresh_punctuation_flags()
            if not self._pending:
                return
        raise TopologyError("the topology keeps producing records to itself (a feedback loop?)")

    def _now(self) -> int:
        return self.wall_clock_ms

    def _make_config(self, config: StreamsConfig | Mapping[str, Any] | None) -> StreamsConfig:
        if isinstance(config, StreamsConfig):
            return config
        values: dict[str, Any] = {"application_id": _DEFAULT_APP, "bootstrap_servers": "dummy:9092"}
        if config:
            # Java-style keys are routed like StreamsConfig.from_properties does; the driver's
            # own id and bootstrap stand in for missing ones (Kafka's driver: putIfAbsent)
            values.update(
                StreamsConfig.from_properties({**values, **config}).model_dump(exclude_unset=True)
                if any("." in k for k in config)
                else dict(config)
            )
        if "state_dir" not in values:
            self._tmp = Path(tempfile.mkdtemp(prefix="ps-driver-"))
            values["state_dir"] = self._tmp
        return StreamsConfig(**values)

    # -- global stores (GlobalKTable) -----------------------------------------------------

    def _global_topics(self) -> dict[str, Any]:
        return {t: g for g in self.plan.global_stores for t in g.source.topics}

    def _make_global_stores(self) -> dict[str, Any]:
        from platform_streams.runtime.tasks.global_state import GlobalStateUpdater

        self._global_updater = GlobalStateUpdater(
            self.plan, self.config, Path(self.config.state_dir), clock_ms=self._now
        )
        self._global_updater.initialize()
        return self._global_updater.stores

    def _update_global(self, record: DriverRecord) -> None:
        self._global_updater.update(record)
