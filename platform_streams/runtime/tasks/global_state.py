"""Global stores (GlobalKTable): every instance keeps a full copy of a topic in a store.

Global stores have no tasks and no changelog: the source topic *is* the log. The
updater owns the stores, deserializes records of the global topics and feeds them to
each store's update processor, and remembers the next offset of every partition it
applied. :class:`~platform_streams.runtime.workers.global_worker.GlobalStreamWorker` drives it:
a bootstrap that reads every partition to its end before any stream task processes,
then a thread that keeps tailing.

Restart rules (Kafka Streams' ``GlobalStateManagerImpl``): positions of *persistent*
stores are checkpointed in ``<state_dir>/<application_id>/global/.checkpoint`` after
each flush; on start a persistent store that opened its local data and has a
checkpoint entry for every partition of its topic resumes there; otherwise (in-memory
stores, a new or unreadable store, a missing or partial checkpoint) it is wiped and its
topic is read from the beginning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.processor.context import NodeContext, TaskContext
from platform_streams.processor.exception_handlers import RecordExceptionHandler
from platform_streams.processor.node import NodeProcessor, as_node_processor
from platform_streams.processor.record_collector import RefusingCollector
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.tasks.task import skip_or_raise_deserialization
from platform_streams.state.checkpoint import CHECKPOINT_FILE_NAME, CheckpointFormatError, OffsetCheckpoint
from platform_streams.state.private_files import app_state_dir
from platform_streams.state.store_context import RestoreCallback
from platform_streams.state.wrappers.base import innermost
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["GLOBAL_TASK_ID", "GlobalStateUpdater"]

log = logging.getLogger(__name__)

#: Global stores live under ``<state_dir>/<application_id>/global``; their context uses this id.
GLOBAL_TASK_ID = TaskId(-1, -1)

TopicPartitionKey = tuple[str, int]

#: Global update processors may not forward or log changes: nothing is sent.
_NO_SEND = RefusingCollector("global store processors cannot send records", partitions=1)


class _StoreRecorder:
    """The global context's registrar: remembers each store (to ask if it opened empty)."""

    def __init__(self) -> None:
        self.stores: dict[str, Any] = {}

    def register_store(
        self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None, partition: int
    ) -> None:
        self.stores[store.name] = store


class GlobalStateUpdater:
    """Holds the global stores and applies records of the global topics to them."""

    def __init__(
        self, plan: TopologyPlan, config: StreamsConfig, state_root: Path, *, clock_ms: Callable[[], int]
    ) -> None:
        self.plan = plan
        self.config = config
        self.directory = app_state_dir(state_root, config.application_id) / "global"
        self._recorder = _StoreRecorder()
        self.context = TaskContext(
            config=config,
            task_id=GLOBAL_TASK_ID,
            collector=_NO_SEND,
            clock_ms=clock_ms,
            task_dir=self.directory,
            changelog_topics={},
            registrar=self._recorder,
        )
        self._deserialization = RecordExceptionHandler(
            "deserialization", config.deserialization_exception_handler, None, _NO_SEND, self.context
        )
        self.stores: dict[str, Any] = {}
        self._by_topic: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], NodeProcessor]] = {}
        self._store_of_topic: dict[str, str] = {}
        self._checkpoint = OffsetCheckpoint(self.directory / CHECKPOINT_FILE_NAME)
        #: (topic, partition) -> next offset to apply; absent = read from the beginning
        self.offsets: dict[TopicPartitionKey, int] = {}
        self.records_applied = 0
        self.records_skipped = 0

    # -- lifecycle ------------------------------------------------------------------------

    def initialize(self, partition_counts: Mapping[str, int] | None = None) -> None:
        """Build stores (logging off: the topic is the log) and their update processors.

        With ``partition_counts`` the checkpoint is checked for every partition; without
        it, any checkpointed partition is trusted and the others start from the beginning.
        """
        for spec in self.plan.global_stores:
            builder = spec.store_builder
            if getattr(builder, "logging_enabled", False):
                builder = builder.with_logging_disabled()  # type: ignore[attr-defined]
            store = builder.build()
            store.init(self.context, store)
            self.stores[spec.store_builder.name] = store
            assert spec.processor.supplier is not None
            processor = as_node_processor(spec.processor.supplier(), spec.processor.name)
            processor.init(NodeContext(self.context, spec.processor.name, {}, spec.processor.stores))
            key_serde = spec.source.key_serde or self.config.default_key_serde
            value_serde = spec.source.value_serde or self.config.default_value_serde
            for topic in spec.source.topics:
                self._by_topic[topic] = (key_serde.deserialize, value_serde.deserialize, processor)
                self._store_of_topic[topic] = spec.store_builder.name
        self._load_checkpoint(partition_counts or {})

    def _load_checkpoint(self, partition_counts: Mapping[str, int]) -> None:
        try:
            saved = self._checkpoint.read()
        except (CheckpointFormatError, OSError) as exc:
            log.warning("global checkpoint unreadable (%s): global stores are rebuilt", exc)
            saved = {}
        for topic, store_name in self._store_of_topic.items():
            entries = {tp: offset for tp, offset in saved.items() if tp[0] == topic}
            expected = partition_counts.get(topic)
            complete = bool(entries) and (expected is None or len(entries) == expected)
            if self._trusted(store_name) and complete:
                self.offsets.update(entries)
            else:
                self._wipe_store(store_name)

    def _trusted(self, store_name: str) -> bool:
        store = self.stores[store_name]
        if not store.persistent:
            return False
        backend = getattr(innermost(store), "backend", None)
        return not (backend is not None and backend.started_empty)

    def _wipe_store(self, store_name: str) -> None:
        store = self.stores[store_name]
        if store.persistent:
            store.wipe()
        for topic, name in self._store_of_topic.items():
            if name == store_name:
                for tp in [tp for tp in self.offsets if tp[0] == topic]:
                    del self.offsets[tp]

    def reset(self) -> None:
        """Forget every position and wipe the stores (a checkpoint beyond the log end)."""
        for name in self.stores:
            self.stores[name].wipe()
        self.offsets.clear()
        self._checkpoint.delete()

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    # -- updates --------------------------------------------------------------------------

    def update(self, raw: Any) -> None:
        """Apply one raw record of a global topic (Kafka's ``GlobalStateUpdateTask.update``)."""
        key_de, value_de, processor = self._by_topic[raw.topic()]
        context = self.context
        self.offsets[(raw.topic(), raw.partition())] = raw.offset() + 1
        try:
            key, value = key_de(raw.key()), value_de(raw.value())
        except Exception as exc:
            skip_or_raise_deserialization(self._deserialization, raw, exc, "global record")
            self.records_skipped += 1
            return
        timestamp = raw.timestamp()[1]
        context.current = raw
        if timestamp > context.stream_time:
            context.stream_time = timestamp
        try:
            processor.process(key, value, timestamp, raw.headers())
        finally:
            context.current = None
        self.records_applied += 1

    def flush(self) -> None:
        for store in self.stores.values():
            store.flush()

    def checkpoint(self) -> None:
        """Flush, then record the positions of persistent stores' topics."""
        self.flush()
        persistent = {t for t, name in self._store_of_topic.items() if self.stores[name].persistent}
        self._checkpoint.write({tp: offset for tp, offset in self.offsets.items() if tp[0] in persistent})

    def close(self) -> None:
        try:
            self.checkpoint()
        except Exception:
            log.exception("global stores: final checkpoint failed (they are rebuilt next time)")
        for store in self.stores.values():
            try:
                store.close()
            except Exception:
                log.exception("closing global store %s failed", store.name)
