"""Stream tasks built straight from a topology, their records collected: no broker, no worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from platform_streams import StreamsConfig, Topology
from platform_streams.processor import TaskId
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.topology import compile_topology


class Collector:
    """Records what sinks send: (topic, key bytes, value bytes, timestamp, headers, partition)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, *args: Any) -> None:
        self.sent.append(args)

    def partition_count(self, topic: str) -> int:
        return 3


def build_tasks(
    topology: Topology,
    tmp_path: Path,
    application_id: str = "tasks",
    collector: Any = None,
    **config: Any,
) -> tuple[list[StreamTask], Any]:
    """Partition 0's task of every sub-topology, stores and processors initialised, sending to
    one collector (a new :class:`Collector` unless given); ``config``: ``StreamsConfig``
    fields beyond the bootstrap servers and the state directory."""
    plan = compile_topology(topology)
    streams_config = StreamsConfig(
        application_id=application_id, bootstrap_servers="x:1", state_dir=tmp_path, **config
    )
    if collector is None:
        collector = Collector()
    tasks = []
    for sub in plan.subtopologies:
        task = StreamTask(
            TaskId(sub.id, 0),
            plan,
            sub,
            config=streams_config,
            collector=collector,
            clock_ms=lambda: 0,
            task_dir=tmp_path / str(sub.id),
        )
        task.initialize_stores()
        task.initialize_processors()
        tasks.append(task)
    return tasks, collector
