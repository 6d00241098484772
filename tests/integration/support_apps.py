"""Running applications in integration tests: in-process clients and killable subprocesses.

Every app in a test uses the same short group timings (the embedded Tansu broker holds a
JoinGroup for about half the session timeout, and a group keeps its first member's
timeouts), a fresh application id, and a per-test state directory. Waits poll a
condition against a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from platform_streams import KafkaStreams, State, StreamsConfig, Topology
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from tests.support.kafka import ConsumedRecord, consume_all

T = TypeVar("T")

#: StreamsConfig fields every test app uses (see tests/support/kafka.py GROUP_TIMING).
APP_TIMING: dict[str, int] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 10000,
}

RUNNER = Path(__file__).with_name("restart_runner.py")


def new_app_id(prefix: str = "app") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def app_config(bootstrap: str, state_dir: Path, app_id: str | None = None, **overrides: Any) -> StreamsConfig:
    """A test application's config: fresh id, short group timings, quick commits."""
    values: dict[str, Any] = {
        "application_id": app_id or new_app_id(),
        "bootstrap_servers": bootstrap,
        "state_dir": state_dir,
        "commit_interval_ms": 200,
        **APP_TIMING,
    }
    values.update(overrides)
    return StreamsConfig(**values)


def wait_until(condition: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.05) -> T:
    """Poll ``condition`` until it returns a truthy value (returned) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting until {what}")
        time.sleep(interval_s)


@contextmanager
def running_app(
    topology: Topology | Any, config: StreamsConfig, *, timeout_s: float = 30.0, close_timeout_s: float = 30.0
) -> Iterator[KafkaStreams]:
    """Start a client, wait until RUNNING (partitions assigned), yield it, always close it."""
    streams = KafkaStreams(topology, config)
    try:
        streams.start()
        streams.wait_for_state(State.RUNNING, timeout_s=timeout_s)
        yield streams
    finally:
        closed = streams.close(timeout_s=close_timeout_s)
        assert closed, f"client {config.application_id} did not stop within {close_timeout_s}s"


def active_tasks(streams: KafkaStreams) -> list[str]:
    """Every task id the client's workers run now (Kafka Streams' ThreadMetadata.activeTasks)."""
    return sorted(t for thread in streams.metadata_for_local_threads() for t in thread["active_tasks"])


def committed(
    admin: KafkaAdmin, group: str, ends: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int | None]:
    """The group's committed offsets for the partitions of ``ends``."""
    return admin.committed_offsets(group, list(ends))


def log_ends(
    placements: Iterable[tuple[int, int]], topic: str, partitions: int
) -> dict[tuple[str, int], int]:
    """Log end offset per partition from ``produce()``'s (partition, offset) results (no transactions)."""
    ends = {(topic, p): 0 for p in range(partitions)}
    for partition, offset in placements:
        ends[(topic, partition)] = max(ends[(topic, partition)], offset + 1)
    return ends


def read_to_end(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[ConsumedRecord]:
    """Everything in ``topic`` up to its current log end (found by fetching, right on Tansu too).

    Counting to an expected number is wrong once duplicates are allowed (at-least-once):
    the count can be reached before every distinct record has been read.
    """
    ends = log_end_offsets({"bootstrap.servers": bootstrap}, [(topic, p) for p in range(partitions)])
    records = consume_all(bootstrap, topic, sum(ends.values()), timeout_s=timeout_s)
    assert len(records) == sum(ends.values()), (
        f"read {len(records)} of {sum(ends.values())} records of {topic}"
    )
    return records


class AppProcess:
    """``restart_runner.py`` in a subprocess: a real process that SIGTERM stops and SIGKILL kills."""

    def __init__(self, log_path: Path, **args: Any) -> None:
        argv = [sys.executable, str(RUNNER)]
        for name, value in args.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        self._log: IO[str] = log_path.open("a")
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=Path(__file__).parents[2]
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.strip())
        self._lines.put("<EOF>")

    def expect(self, line: str, timeout_s: float = 45.0) -> None:
        """Wait until the runner prints ``line`` (it prints RUNNING once partitions are assigned)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                got = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"runner did not print {line!r} within {timeout_s}s") from None
            if got == line:
                return
            if got == "<EOF>":
                raise AssertionError(f"runner exited ({self.proc.wait()}) before printing {line!r}")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 40.0) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout_s)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self._log.close()
