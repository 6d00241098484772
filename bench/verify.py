"""Checks each run's output against the right answer, so no engine is fast by being wrong.

* stateless: exactly the records the filter keeps;
* count: the last count of every key equals the number of its input records (engines may
  emit every update or, with a record cache, fewer; the final table is what must agree);
* window_sum: every emitted window has the exact sum of its records (float tolerance), no
  window is emitted twice, and every window that closed well before the end was emitted;
* restore: the rebuilt store holds one entry per key.
"""

from __future__ import annotations

from typing import Any

import confluent_kafka
import orjson

from bench.workloads import (
    WINDOW_MS,
    Workload,
    expected_count_per_key,
    expected_stateless_outputs,
    expected_window_sums,
)


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every committed record of ``topic`` (a group-less consumer reading to the end)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.queue.backoff.ms": 10,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    records: list[Any] = []
    at_end: set[int] = set()
    try:
        while len(at_end) < partitions:
            for msg in consumer.consume(10_000, 1.0):
                err = msg.error()
                if err is None:
                    records.append(msg)
                elif err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {err}")
    finally:
        consumer.close()
    return records


class Answer:
    """The right output of one workload over one input (computed once, lazily)."""

    def __init__(self, workload: Workload, records: int, base_ts: int) -> None:
        self.workload = workload
        self.records = records
        self.base_ts = base_ts
        self._expected: Any = None

    def _answer(self) -> Any:
        if self._expected is None:
            kind, spec = self.workload.kind, self.workload.input
            if kind == "stateless":
                self._expected = expected_stateless_outputs(self.records)
            elif kind == "count":
                self._expected = expected_count_per_key(spec, self.records)
            else:
                self._expected = expected_window_sums(spec, self.records, self.base_ts)
        return self._expected

    def check(self, bootstrap: str, topic: str, partitions: int, engine: str) -> int:
        """Raise if ``engine`` wrote a wrong answer to ``topic``; returns the records it wrote."""
        out = read_topic(bootstrap, topic, partitions)
        kind, expected = self.workload.kind, self._answer()
        where = f"{engine} on {self.workload.name}"
        if kind == "stateless":
            if len(out) != expected:
                raise AssertionError(f"{where}: {len(out)} outputs, expected {expected}")
        elif kind == "count":
            last = {msg.key(): int(msg.value()) for msg in out}
            wrong = [k for k, n in expected.items() if last.get(k) != n]
            if wrong or len(last) != len(expected):
                k = wrong[0] if wrong else None
                raise AssertionError(
                    f"{where}: {len(wrong)} of {len(expected)} keys have wrong final counts "
                    f"(e.g. {k!r}: {last.get(k) if k else None} != {expected.get(k) if k else None}); "
                    f"{len(last)} keys seen"
                )
        else:
            self._check_windows(out, expected, where)
        return len(out)

    def _check_windows(self, out: list[Any], expected: dict[tuple[bytes, int], float], where: str) -> None:
        seen: set[tuple[bytes, int]] = set()
        for msg in out:
            value = orjson.loads(msg.value())
            window = (msg.key(), value["start"])
            if window in seen:
                raise AssertionError(f"{where}: window {window} emitted twice")
            seen.add(window)
            want = expected.get(window)
            if want is None or abs(value["value"] - want) > 1e-6 * max(1.0, abs(want)):
                raise AssertionError(f"{where}: window {window} = {value['value']}, expected {want}")
        # every partition's stream time ends within a few ms of the last timestamp
        closed_before = self.base_ts + self.records - 1 - 1000
        missing = [w for w in expected if w[1] + WINDOW_MS <= closed_before and w not in seen]
        if missing:
            raise AssertionError(f"{where}: {len(missing)} closed windows not emitted, e.g. {missing[0]}")

    def restored_problem(self, entries: int) -> str | None:
        """What is wrong with a store rebuilt with ``entries`` entries (None: it is right)."""
        keys = len(self._answer())
        return None if entries == keys else f"restored {entries:,} entries of {keys:,} keys"
