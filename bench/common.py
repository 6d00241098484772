"""What every benchmark child shares, whichever interpreter runs it.

Quix Streams pins an older confluent-kafka (and pydantic) than platform_streams needs, so
its runs use their own virtualenv (``bench/.venv-quix``, created by ``bench/run.py``). This
module and :mod:`bench.workloads` are therefore imported by children of *both*
interpreters: they use the standard library and orjson only -- never platform_streams.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Group timings for every engine: short, so joins on the embedded broker take ~3 s, not ~23 s.
#: ``BENCH_GROUP_TIMING=loaded`` (a machine loaded far beyond its cores) gives every engine
#: (the JVM too) 30 s sessions and 120 s poll intervals instead: a stateful commit of millions
#: of keys then outlasts 10 s and the member would leave the group mid-run.
GROUP_TIMING: dict[str, Any] = (
    {"session_timeout_ms": 30000, "heartbeat_interval_ms": 3000, "max_poll_interval_ms": 120000}
    if os.environ.get("BENCH_GROUP_TIMING") == "loaded"
    else {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "max_poll_interval_ms": 10000}
)

#: librdkafka settings every engine's consumer gets: platform_streams' defaults (which the
#: raw loop reuses through ``StreamsConfig.consumer_configs``), handed to Quix as extra config.
CONSUMER_TUNING: dict[str, Any] = {
    "session.timeout.ms": GROUP_TIMING["session_timeout_ms"],
    "heartbeat.interval.ms": GROUP_TIMING["heartbeat_interval_ms"],
    "max.poll.interval.ms": GROUP_TIMING["max_poll_interval_ms"],
    "fetch.wait.max.ms": 100,
    "fetch.queue.backoff.ms": 10,
    "partition.assignment.strategy": "range",
    "allow.auto.create.topics": False,
}
#: ... and every engine's producer.
PRODUCER_TUNING: dict[str, Any] = {
    "linger.ms": 100,
    "acks": "all",
    "partitioner": "murmur2_random",
}


@dataclass(frozen=True)
class RunSpec:
    """One measured run, passed to the child process as JSON."""

    workload: str
    engine: str
    bootstrap: str
    input_topic: str
    output_topic: str
    records: int
    state_dir: str
    #: the application id / consumer group (the restore phase reuses the process phase's)
    app_id: str
    #: "process" (consume the input) or "restore" (rebuild the state from the changelog)
    phase: str = "process"
    #: input partition -> log end offset (the offset after the last record)
    input_ends: dict[str, int] = field(default_factory=dict)
    #: ``StreamsConfig`` overrides for platform_streams (bench/memory.py: the cache size)
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    workload: str
    engine: str
    #: input records processed; for a restore, changelog records read
    records: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    outputs: int = 0
    #: restore: entries found in the rebuilt store(s)
    restored_entries: int = 0
    note: str = ""
    #: why this run's answer is wrong because of the broker (bench/run.py), shown instead of its rate
    wrong: str = ""

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s if self.wall_s > 0 else 0.0


class Timer:
    """Wall and process CPU time (all threads: Python and librdkafka) between start and stop."""

    def __init__(self) -> None:
        self._t0: float | None = None
        self._cpu0 = 0.0
        self.wall_s = 0.0
        self.cpu_s = 0.0

    @staticmethod
    def _cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    @property
    def started(self) -> bool:
        return self._t0 is not None

    def start(self) -> None:
        if self._t0 is None:  # the first assignment starts the clock
            self._t0, self._cpu0 = time.perf_counter(), self._cpu()

    def stop(self) -> None:
        assert self._t0 is not None, "the engine never got its partitions"
        self.wall_s, self.cpu_s = time.perf_counter() - self._t0, self._cpu() - self._cpu0


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (getrusage's ru_maxrss survives exec, so a child
    would report its parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class EndTracker:
    """Knows when every input partition has been processed up to its end offset."""

    def __init__(self, spec: RunSpec) -> None:
        self.last = {int(p): end - 1 for p, end in spec.input_ends.items() if end > 0}
        self.remaining = set(self.last)

    def processed(self, partition: int, offset: int) -> bool:
        """Record that ``offset`` of ``partition`` was processed; True once all are done."""
        if offset >= self.last.get(partition, 1 << 62):
            self.remaining.discard(partition)
        return not self.remaining
