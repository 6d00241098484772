"""Running applications in integration tests: in-process clients and killable subprocesses.

Every app in a test uses the same short group timings (the embedded Tansu broker holds a
JoinGroup for about half the session timeout, and a group keeps its first member's
timeouts), a fresh application id, and a per-test state directory. Waits poll a
condition against a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig, Topology
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.processor import Processor, PunctuationType, Record
from platform_streams.serde import Long, String
from tests.support.kafka import ConsumedRecord, consume_all, new_topic

T = TypeVar("T")

#: StreamsConfig fields every test app uses (see tests/support/kafka.py GROUP_TIMING).
APP_TIMING: dict[str, int] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 10000,
}

RUNNER = Path(__file__).with_name("restart_runner.py")


class Ticking(Processor):
    """Does nothing but punctuate on the wall clock every 50 ms: a stream (``.process(Ticking)``)
    gives an app's metrics punctuate series (scrape and dashboard tests)."""

    def init(self, context: Any) -> None:
        super().init(context)
        context.schedule(50, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        pass

    def tick(self, timestamp: int) -> None:
        pass


def upper_case_app(source: str, sink: str) -> StreamsBuilder:
    """The smallest stateless application: ``source`` -> upper-cased values -> ``sink`` (strings)."""
    strings = String()
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=strings, value_serde=strings)).map_values(str.upper).to(
        sink, Produced(key_serde=strings, value_serde=strings)
    )
    return builder


def count_app(source: str, sink: str) -> StreamsBuilder:
    """String records counted per key in the cached store ``counts``, the counts as Longs to ``sink``."""
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_("counts")
    ).to_stream().to(sink, Produced(key_serde=String(), value_serde=Long()))
    return builder


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
    topology: Topology | Any, config: StreamsConfig, *, timeout_s: float = 90.0, close_timeout_s: float = 60.0
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


def wait_committed(
    admin: KafkaAdmin, group: str, ends: Mapping[tuple[str, int], int], what: str, timeout_s: float = 30.0
) -> None:
    """Wait until the group's committed offsets are exactly ``ends`` (every input processed)."""
    wait_until(lambda: admin.committed_offsets(group, list(ends)) == ends, timeout_s, what)


def active_tasks(streams: KafkaStreams) -> list[str]:
    """Every task id the client's workers run now (Kafka Streams' ThreadMetadata.activeTasks)."""
    return sorted(t for thread in streams.metadata_for_local_threads() for t in thread["active_tasks"])


def join_then_leave(
    first: KafkaStreams, second: KafkaStreams, *, first_keeps: int, total: int, timeout_s: float = 30
) -> None:
    """Start ``second`` beside the running ``first`` until both run and ``first`` is down to
    ``first_keeps`` tasks, then close ``second`` until ``first`` runs all ``total`` again."""
    second.start()
    wait_until(
        lambda: len(active_tasks(first)) == first_keeps and second.state() is State.RUNNING,
        timeout_s,
        "the second instance took its tasks",
    )
    assert second.close(timeout_s=30)
    wait_until(
        lambda: len(active_tasks(first)) == total and first.state() is State.RUNNING,
        timeout_s,
        "the first instance took all tasks back",
    )


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


def committed_all(admin: KafkaAdmin, app_id: str, topic: str, partitions: int, bootstrap: str) -> bool:
    """True once the group committed every input partition up to its end."""
    ends = log_end_offsets({"bootstrap.servers": bootstrap}, [(topic, p) for p in range(partitions)])
    committed = admin.committed_offsets(app_id, list(ends))
    return all((committed.get(tp) or 0) >= end for tp, end in ends.items())


@dataclass(frozen=True)
class RunnerApp:
    """The application a runner script runs, on fresh ``in``/``out`` topics: what the runner's
    arguments name and what the checks read back."""

    bootstrap: str
    admin: KafkaAdmin
    app_id: str
    source: str
    sink: str
    partitions: int
    #: the apps' ``group_protocol``; "streams" is passed on as ``--group-protocol`` (only
    #: eos_runner.py takes it), "classic" is the runners' default and not passed
    group_protocol: str = "classic"

    @classmethod
    def create(
        cls, bootstrap: str, admin: KafkaAdmin, app_id: str, partitions: int, group_protocol: str = "classic"
    ) -> RunnerApp:
        source, sink = new_topic(admin, partitions, "in"), new_topic(admin, partitions, "out")
        return cls(bootstrap, admin, app_id, source, sink, partitions, group_protocol)

    def runner_args(self, **more: Any) -> dict[str, Any]:
        """The runner's ``--bootstrap --app-id --input --output`` (and ``--group-protocol``
        when not classic), then ``more``."""
        protocol = {"group_protocol": self.group_protocol} if self.group_protocol != "classic" else {}
        return {
            "bootstrap": self.bootstrap,
            "app_id": self.app_id,
            "input": self.source,
            "output": self.sink,
            **protocol,
            **more,
        }

    def assert_ran_as_streams_members(self, logs: str) -> None:
        """Under ``group_protocol="streams"``, that the broker assigned the runners' tasks (the
        worker logs each assignment of its streams group), so the run proved that protocol."""
        if self.group_protocol == "streams":
            assert "the streams group assigns" in logs, "no runner was assigned tasks by a streams group"

    def committed_total(self) -> int:
        """Input offsets the group committed, summed over the input partitions."""
        committed = self.admin.committed_offsets(
            self.app_id, [(self.source, p) for p in range(self.partitions)]
        )
        return sum(o or 0 for o in committed.values())

    def all_committed(self) -> bool:
        """True once the group committed every input partition up to its end."""
        return committed_all(self.admin, self.app_id, self.source, self.partitions, self.bootstrap)


def read_to_end(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> list[ConsumedRecord]:
    """Everything in ``topic`` up to its current log end (found by fetching, right on Tansu too).

    Counting to an expected number is wrong once duplicates are allowed (at-least-once):
    the count can be reached before every distinct record has been read.
    """
    ends = log_end_offsets({"bootstrap.servers": bootstrap}, [(topic, p) for p in range(partitions)])
    records = consume_all(bootstrap, topic, sum(ends.values()), timeout_s=timeout_s)
    # a batch may overshoot one partition's end while the app keeps writing (fast on Kafka):
    # keep what was in the log when the ends were taken, and read on until all of it is here
    deadline = time.monotonic() + timeout_s
    while True:
        kept = [r for r in records if r.offset < ends[(topic, r.partition)]]
        if len(kept) >= sum(ends.values()) or time.monotonic() > deadline:
            break
        records = consume_all(
            bootstrap, topic, len(records) + 1, timeout_s=max(1.0, deadline - time.monotonic())
        )
    assert len(kept) == sum(ends.values()), f"read {len(kept)} of {sum(ends.values())} records of {topic}"
    return kept


def runner_parser(description: str | None) -> argparse.ArgumentParser:
    """The arguments every runner script from ``--input`` to ``--output`` takes (the runner
    side of :meth:`RunnerApp.runner_args`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--delay-us", type=int, default=0, help="sleep per record, to stretch processing")
    return parser


def close_and_report(streams: KafkaStreams) -> int:
    """A runner's end after SIGTERM: close the client, print ``CLOSED`` (or ``CLOSE-TIMEOUT``)
    and return the exit status, 0 only for a clean close."""
    clean = streams.close(timeout_s=30)
    print("CLOSED" if clean else "CLOSE-TIMEOUT", flush=True)
    return 0 if clean and streams.state() is State.NOT_RUNNING else 1


class RunnerProcess:
    """A runner script of the tests in a subprocess: each keyword argument that is not None
    becomes ``--name value``, stderr goes to ``log_path``, stdout is read line by line."""

    #: the script to run
    runner: Path
    #: how long ``terminate`` waits for the exit status by default
    stop_timeout_s: float

    def __init__(self, log_path: Path, **args: Any) -> None:
        argv = [sys.executable, str(self.runner)]
        for name, value in args.items():
            if value is not None:
                argv += [f"--{name.replace('_', '-')}", str(value)]
        self.log_path = log_path
        self._log: IO[str] = log_path.open("a")
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=Path(__file__).parents[2]
        )
        self._lines: queue.Queue[str] = queue.Queue()
        #: every line the runner printed so far
        self.events: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(line.strip())
            self._lines.put(line.strip())
        self._lines.put("<EOF>")

    def wait_for_line(self, matches: Callable[[str], bool], what: str, timeout_s: float) -> str:
        """The runner's first next stdout line that ``matches``; fails if the runner exits or
        ``timeout_s`` passes first (``what`` names the line in the failure)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                got = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"runner did not print {what} within {timeout_s}s; see {self.log_path}"
                ) from None
            if matches(got):
                return got
            if got == "<EOF>":
                raise AssertionError(f"runner exited ({self.proc.wait()}) before {what}; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no close, no final commit, no leave-group."""
        self.proc.kill()
        self.proc.wait(10)

    def terminate(self, timeout_s: float | None = None) -> int:
        """SIGTERM, then the exit status."""
        self.proc.terminate()
        return self.proc.wait(self.stop_timeout_s if timeout_s is None else timeout_s)

    def close(self) -> None:
        """Kill the runner if it still runs (a test that failed half way)."""
        if self.proc.poll() is None:
            self.kill()
        self._log.close()


class AppProcess(RunnerProcess):
    """``restart_runner.py`` in a subprocess: a real process that SIGTERM stops and SIGKILL kills."""

    runner = RUNNER
    stop_timeout_s = 40.0

    def expect(self, line: str, timeout_s: float = 45.0) -> None:
        """Wait until the runner prints ``line`` (it prints RUNNING once partitions are assigned)."""
        self.wait_for_line(lambda got: got == line, repr(line), timeout_s)
