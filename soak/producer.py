"""The soak input: records at a steady rate, keys with per-key sequence numbers, and the
history the checker compares against (kept as aggregates, so an hour fits in memory).

Record ``seq`` of key ``k<i>`` has value ``"<seq>"`` (1, 2, ...) and the wall clock as its
timestamp; a poison record has value ``poison-<n>``. Only delivered records enter the
history; the producer is idempotent with no delivery timeout, so a broker pause delays
records instead of losing them.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from platform_streams.kafka import create_producer
from soak.app import GRACE_MS, POISON_PREFIX, WINDOW_MS, amount
from soak.connection import client_conf


@dataclass
class History:
    """What was delivered: per key the last sequence number, per (key, window start) the
    sum and count, per partition the largest timestamp and the log end, the poison values."""

    last_seq: dict[str, int] = field(default_factory=dict)
    windows: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    partition_of: dict[str, int] = field(default_factory=dict)
    stream_time: dict[int, int] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    poison: dict[str, float] = field(default_factory=dict)
    records: int = 0
    failed: int = 0

    def closed_windows(self, margin_ms: int = 1000) -> dict[tuple[str, int], list[int]]:
        """Windows every emit-final task must have emitted: end + grace (+ margin) passed by
        the stream time of the key's partition."""
        out = {}
        for (key, start), agg in self.windows.items():
            time_now = self.stream_time.get(self.partition_of[key], 0)
            if start + WINDOW_MS + GRACE_MS + margin_ms <= time_now:
                out[(key, start)] = agg
        return out


def produce_table(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> None:
    """Write the table's ``(key, value)`` records before the input starts, with Java's
    partitioner (the joins need the keys where Kafka Streams would put them)."""
    producer = create_producer({**client_conf(bootstrap), "partitioner": "murmur2_random"})
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for key, value in records:
        producer.produce(topic, key=key.encode(), value=value.encode(), on_delivery=delivered)
    if producer.flush(30) or failed:
        why = failed[:3] or "not delivered in 30 s"
        raise RuntimeError(f"soak: writing the table to {topic} failed: {why}")


class Producer:
    """Produces ``rate`` records/s from a thread until :meth:`stop`; ``poison()`` adds one."""

    def __init__(self, bootstrap: str, topic: str, rate: int, keys: int, seed: int) -> None:
        self.topic = topic
        self.history = History()
        self._rate = rate
        self._keys = keys
        self._rng = random.Random(seed)
        self._next_seq: dict[str, int] = defaultdict(int)
        self._poison_pending: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-producer", daemon=True)
        self._producer = create_producer(
            {
                **client_conf(bootstrap),
                "enable.idempotence": True,
                "message.timeout.ms": 0,  # never give up: a paused broker delays, it loses nothing
                "linger.ms": 20,
                # Java's partitioner: key queries are routed to one partition by murmur2
                "partitioner": "murmur2_random",
                "allow.auto.create.topics": False,
            }
        )
        self.error: str | None = None

    def start(self) -> Producer:
        self._thread.start()
        return self

    def poison(self) -> str:
        """Queue one poison record (sent by the producer thread); returns its value."""
        with self._lock:
            value = f"{POISON_PREFIX}{len(self.history.poison) + len(self._poison_pending)}"
            self._poison_pending.append((f"k{self._rng.randrange(self._keys)}", value))
        return value

    def _delivered(self, err: Any, msg: Any) -> None:
        history = self.history
        if err is not None:
            history.failed += 1
            self.error = str(err)
            return
        key, value, partition = msg.key().decode(), msg.value().decode(), msg.partition()
        history.ends[partition] = max(history.ends.get(partition, 0), msg.offset() + 1)
        if value.startswith(POISON_PREFIX):
            history.poison[value] = time.time()
            return
        seq, ts = int(value), msg.timestamp()[1]
        history.records += 1
        history.last_seq[key] = max(history.last_seq.get(key, 0), seq)
        history.partition_of[key] = partition
        history.stream_time[partition] = max(history.stream_time.get(partition, 0), ts)
        window = history.windows[(key, ts - ts % WINDOW_MS)]
        window[0] += amount(seq)
        window[1] += 1

    def _send(self, key: str, value: str) -> None:
        while True:
            try:
                self._producer.produce(
                    self.topic,
                    value.encode(),
                    key.encode(),
                    on_delivery=self._delivered,
                    timestamp=int(time.time() * 1000),
                )
                return
            except BufferError:
                self._producer.poll(0.1)

    def _run(self) -> None:
        tick = 0.05
        per_tick = self._rate * tick
        owed = 0.0
        next_at = time.monotonic()
        while not self._stop.is_set():
            owed += per_tick
            for _ in range(int(owed)):
                key = f"k{self._rng.randrange(self._keys)}"
                self._next_seq[key] += 1
                self._send(key, str(self._next_seq[key]))
            owed -= int(owed)
            with self._lock:
                pending, self._poison_pending = self._poison_pending, []
            for key, value in pending:
                self._send(key, value)
            self._producer.poll(0)
            next_at += tick
            time.sleep(max(0.0, next_at - time.monotonic()))
            if next_at < time.monotonic() - 5:  # far behind (a loaded machine): do not burst
                next_at = time.monotonic()

    @property
    def sent(self) -> int:
        return sum(self._next_seq.values())

    def stop(self, timeout_s: float = 300.0) -> None:
        """Stop producing and wait until every record is delivered."""
        self._stop.set()
        self._thread.join(30)
        remaining = self._producer.flush(timeout_s)
        if remaining:
            self.error = f"{remaining} records not delivered within {timeout_s}s"
