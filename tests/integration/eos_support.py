"""Helpers of the exactly-once, standby and failure tests: runner processes, input, checks.

The counting app of ``eos_runner.py`` writes one output record per input record, the key's
new count. So after any history of crashes and restarts:

* the state is exact iff the *last* count per key equals the number of inputs of the key;
* the output has no duplicates iff, read with read_committed, each key's values are
  ``1, 2, ..., n`` with no value twice (a repeat is a duplicate update, a gap a lost one).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    TopicPartition,
    create_consumer,
    create_producer,
)
from tests.integration.support_apps import RunnerApp, RunnerProcess, committed_all, new_app_id
from tests.support.kafka import ConsumedRecord, consume_all, new_topic, produce

RUNNER = Path(__file__).with_name("eos_runner.py")


class Runner(RunnerProcess):
    """``eos_runner.py`` in a subprocess; its stdout events are collected for ``expect``."""

    runner = RUNNER
    stop_timeout_s = 45.0

    def expect(self, prefix: str, timeout_s: float = 45.0) -> str:
        """Wait for the next event line starting with ``prefix``; returns it."""
        return self.wait_for_line(lambda got: got.startswith(prefix), repr(prefix), timeout_s)

    def last(self, kind: str) -> Any:
        """The JSON payload of the latest ``kind`` event (None if there was none)."""
        for line in reversed(list(self.events)):
            if line.startswith(kind + " "):
                return json.loads(line[len(kind) + 1 :])
        return None

    def signal(self, signum: int) -> None:
        os.kill(self.proc.pid, signum)


class Runners:
    """The runners a test started; :func:`runners` kills those still alive at the end."""

    def __init__(self) -> None:
        self._started: list[Runner] = []

    def __iter__(self) -> Iterator[Runner]:
        return iter(self._started)

    def start(self, log_path: Path, *, running: bool = True, **args: Any) -> Runner:
        """A new runner; with ``running``, returned once it printed RUNNING (within 60 s)."""
        runner = Runner(log_path, **args)
        self._started.append(runner)
        if running:
            runner.expect("RUNNING", 60)
        return runner


def inputs(start: int, n: int, keys: int) -> list[tuple[str, str]]:
    """Records ``(k<i % keys>, v<i>)``: value ``v<i>`` is unique, so a failure can target it."""
    return [(f"k{i % keys}", f"v{i}") for i in range(start, start + n)]


class Feeder:
    """Produces the input in chunks from a background thread, so it flows while tests kill."""

    def __init__(self, bootstrap: str, topic: str, total: int, keys: int, chunk: int, pause_s: float) -> None:
        self.expected: Counter[str] = Counter()
        self.produced = 0
        self._args = (bootstrap, topic, total, keys, chunk, pause_s)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        bootstrap, topic, total, keys, chunk, pause_s = self._args
        try:
            while self.produced < total:
                batch = inputs(self.produced, min(chunk, total - self.produced), keys)
                produce(bootstrap, topic, batch)
                self.expected.update(k for k, _ in batch)
                self.produced += len(batch)
                time.sleep(pause_s)
        except BaseException as exc:
            self.error = exc

    def is_alive(self) -> bool:
        """True while records are still being fed."""
        return self._thread.is_alive()

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def join(self, timeout_s: float = 120.0) -> Counter[str]:
        self._thread.join(timeout_s)
        assert self.error is None, f"producing the input failed: {self.error!r}"
        assert not self._thread.is_alive(), "producing the input did not finish"
        return self.expected


def read_output(bootstrap: str, topic: str, partitions: int, *, committed_only: bool) -> list[ConsumedRecord]:
    """Every record of ``topic`` up to the end seen by fetching (read_committed: up to the LSO)."""
    consumer = create_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "fetch.wait.max.ms": 10,
        }
    )
    records: list[ConsumedRecord] = []
    try:
        consumer.list_topics(timeout=10)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == -191:  # _PARTITION_EOF
                        at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                records.append(
                    ConsumedRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), 0, [])
                )
        assert len(at_end) == partitions, f"could not read {topic} to its end"
    finally:
        consumer.close()
    return records


def updates_per_key(records: list[ConsumedRecord]) -> dict[str, list[int]]:
    """Key -> the count values written for it, in output order."""
    out: dict[str, list[int]] = defaultdict(list)
    for record in records:
        assert record.key is not None and record.value is not None
        out[record.key.decode()].append(int(record.value))
    return dict(out)


def read_updates(app: RunnerApp, *, committed_only: bool) -> dict[str, list[int]]:
    """Key -> the count values the app wrote for it, in output order."""
    return updates_per_key(
        read_output(app.bootstrap, app.sink, app.partitions, committed_only=committed_only)
    )


def final_counts(updates: dict[str, list[int]]) -> dict[str, int]:
    return {key: values[-1] for key, values in updates.items()}


def duplicate_updates(updates: dict[str, list[int]], expected: Counter[str]) -> dict[str, list[int]]:
    """Keys whose values are not exactly ``1..n`` (each once, in order), with their values."""
    return {key: values for key, values in updates.items() if values != list(range(1, expected[key] + 1))}


def broker_aborts_dead_transactions(
    bootstrap: str, admin: KafkaAdmin, *, conf: Mapping[str, Any] | None = None
) -> bool:
    """Capability probe: does a new producer with a dead one's transactional.id *abort* its open
    transaction (Apache Kafka), or commit it (Tansu)? Decides whether duplicates after SIGKILL
    are the broker's doing or ours. ``conf``: security settings of every client."""
    topic = new_topic(admin, 1, "txn-probe")
    tid = f"probe-{uuid.uuid4().hex[:10]}"
    extra = dict(conf or {})
    dead = create_producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})
    dead.init_transactions(15)
    dead.begin_transaction()
    dead.produce(topic, b"left-open", partition=0)
    dead.flush(10)
    heir = create_producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **extra})
    heir.init_transactions(30)
    heir.begin_transaction()
    heir.produce(topic, b"after", partition=0)
    heir.commit_transaction(15)
    read = consume_all(bootstrap, topic, 2, timeout_s=5, isolation="read_committed", conf=extra)
    values = [r.value for r in read]
    return values == [b"after"]


@contextmanager
def runners() -> Iterator[Runners]:
    """Collects runner processes and kills whatever is still alive at the end."""
    started = Runners()
    try:
        yield started
    finally:
        for runner in started:
            runner.close()


__all__ = [
    "Feeder",
    "Runner",
    "RunnerApp",
    "Runners",
    "broker_aborts_dead_transactions",
    "committed_all",
    "duplicate_updates",
    "final_counts",
    "inputs",
    "new_app_id",
    "new_topic",
    "read_output",
    "read_updates",
    "runners",
    "updates_per_key",
]
