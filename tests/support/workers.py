"""A stream worker built from a topology and not started: what its constructor decides
(input queues, guards, purger) can be looked at, and its steps driven by hand."""

from __future__ import annotations

from platform_streams import StreamsConfig, Topology
from platform_streams.runtime.workers.worker import StreamWorker
from platform_streams.topology import compile_topology


def idle_worker(topology: Topology, config: StreamsConfig, partition_counts: dict[str, int]) -> StreamWorker:
    """Worker 0 of ``topology``, callbacks ignored; no thread, no client until it runs."""
    return StreamWorker(
        0,
        compile_topology(topology),
        config,
        partition_counts=partition_counts,
        on_state_change=lambda worker, state: None,
        on_failure=lambda worker, exc: None,
    )
