"""Global stores (GlobalKTable): every instance keeps a full copy of a topic in a store.

Global stores have no tasks and no changelog: the source topic *is* the log. The
updater owns the stores, deserializes records of the global topics and feeds them
to each store's update processor. The worker bootstraps it (reads every partition
to its end) before any stream task processes, then keeps it updated.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.processor.context import NodeContext, TaskContext
from platform_streams.processor.node import NodeProcessor, as_node_processor
from platform_streams.processor.task_id import TaskId
from platform_streams.topology.compiler import TopologyPlan

#: Global stores live under ``<state_dir>/<application_id>/global``; their context uses this id.
GLOBAL_TASK_ID = TaskId(-1, -1)


class _NullCollector:
    """Global update processors may not forward or log changes: nothing is sent."""

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Any,
             partition: int | None) -> None:
        raise RuntimeError("global store processors cannot send records")

    def partition_count(self, topic: str) -> int:
        return 1


class GlobalStateUpdater:
    """Holds the global stores and applies records of the global topics to them."""

    def __init__(
        self, plan: TopologyPlan, config: StreamsConfig, state_root: Path, *, clock_ms: Callable[[], int]
    ) -> None:
        self.plan = plan
        self.config = config
        self.context = TaskContext(
            config=config,
            task_id=GLOBAL_TASK_ID,
            collector=_NullCollector(),
            clock_ms=clock_ms,
            task_dir=state_root / config.application_id / "global",
            changelog_topics={},
        )
        self.stores: dict[str, Any] = {}
        self._by_topic: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], NodeProcessor]] = {}

    def initialize(self) -> None:
        """Build stores (logging off: the topic is the log) and their update processors."""
        for spec in self.plan.global_stores:
            builder = spec.store_builder
            if getattr(builder, "logging_enabled", False):
                builder = builder.with_logging_disabled()
            store = builder.build()
            store.init(self.context, store)
            self.stores[spec.store_builder.name] = store
            processor = as_node_processor(spec.processor.supplier(), spec.processor.name)  # type: ignore[misc]
            processor.init(NodeContext(self.context, spec.processor.name, {}, spec.processor.stores))
            key_serde = spec.source.key_serde or self.config.default_key_serde
            value_serde = spec.source.value_serde or self.config.default_value_serde
            for topic in spec.source.topics:
                self._by_topic[topic] = (key_serde.deserialize, value_serde.deserialize, processor)

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    def update(self, raw: Any) -> None:
        """Apply one raw record of a global topic."""
        key_de, value_de, processor = self._by_topic[raw.topic()]
        self.context.current = raw
        try:
            processor.process(key_de(raw.key()), value_de(raw.value()), raw.timestamp()[1], raw.headers())
        finally:
            self.context.current = None

    def flush(self) -> None:
        for store in self.stores.values():
            store.flush()

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
