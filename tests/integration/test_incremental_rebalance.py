"""A rebalance pauses only the tasks that move (``rebalance_protocol="cooperative"``).

The user-visible measure of the issue: a counting application on 6 partitions runs on two
instances under steady input (cache off, so every input record gives an output record at
once; at-least-once, whose output does not wait for commits: under exactly-once the output
of a kept task becomes visible with the first commit of the new generation, see
docs/scale-out.md); a third instance joins. For every input partition the test records
the longest gap between output records from the join until the three instances have
settled. A task that keeps its owner must keep producing throughout (Kafka Streams'
cooperative rebalancing, KIP-429: ``StreamThread``/``TaskManager.handleRevocation`` keep
the tasks that are not revoked running; ``TaskManager.commit`` waits while a rebalance is
in progress), while moved tasks pause. Under the eager protocol every task stops for the
whole rebalance (measured with this test before the change: 3.9-4.3 s on Tansu, 0.65-1.0 s
on the test Apache Kafka). Afterwards every count is exact: the handover and the kept
tasks' re-assigned input lost and doubled nothing.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, State, StreamsConfig
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    TopicPartition,
    create_consumer,
    create_producer,
)
from platform_streams.query import KeyQuery, StateQueryRequest
from platform_streams.serde import Long
from tests.integration.support_apps import active_tasks, app_config, count_app, new_app_id, wait_until
from tests.support.kafka import consume_all, new_group_id, new_topic

PARTITIONS = 6
#: a record per partition this often: a steady gap of ~0.1-0.3 s between outputs
INTERVAL_S = 0.05
#: the longest gap a task that keeps its owner may show. Steady state: ~0.3 s; the issue's
#: goal of 1 s is bench/rebalance.py's to measure on a quiet machine. The three clients share
#: this process, so a loaded machine adds stalls of the whole process (up to ~1.8 s at
#: load 17); an eager rebalance stops every task for 2.4 s on Apache Kafka and 5.7 s on the
#: embedded broker even on a quiet machine, so this bound still tells the two apart.
KEPT_BOUND_S = 2.0


class _Feed(threading.Thread):
    """Steady input: one record per partition every ``INTERVAL_S``, keys ``p<partition>-<n>``,
    the round as value. Idempotent, as Java's producer is by default: a produce request that
    librdkafka retries on a loaded machine would otherwise write its records twice, and the
    counts would differ from what was sent without the application having done anything."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = create_producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
        )
        self.topic = topic
        self.stop = threading.Event()
        self.sent = [0] * PARTITIONS

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            for p in range(PARTITIONS):
                self.producer.produce(
                    self.topic, key=f"p{p}-{n % 50}".encode(), value=str(n).encode(), partition=p
                )
                self.sent[p] += 1
            self.producer.poll(0)
            n += 1
            time.sleep(INTERVAL_S)
        self.producer.flush(30)


class _Watch(threading.Thread):
    """Reads the output (read_committed): per input partition, the arrival times of its outputs
    and the latest count of every key."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = create_consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": new_group_id("watch"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.stop = threading.Event()
        self.arrivals: list[list[float]] = [[] for _ in range(PARTITIONS)]
        self.counts: dict[str, int] = {}

    def run(self) -> None:
        longs = Long()
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(500, 0.05):
                    if msg.error() is not None or msg.key() is None:
                        continue
                    key = msg.key().decode()
                    self.arrivals[int(key[1 : key.index("-")])].append(time.monotonic())
                    self.counts[key] = longs.deserialize(msg.value())
        finally:
            self.consumer.close()

    def longest_gaps(self, since: float, until: float) -> list[float]:
        gaps = []
        for times in self.arrivals:
            window = [since, *(t for t in times if since <= t <= until), until]
            gaps.append(max(b - a for a, b in itertools.pairwise(window)))
        return gaps


class _Ask(threading.Thread):
    """Interactive queries during the rebalance (KIP-535): every 50 ms, each partition's key
    ``p<partition>-0`` asked of the client that ran its task before, requiring an active
    task; the times each partition's answer failed."""

    def __init__(self, owners: dict[int, KafkaStreams]) -> None:
        super().__init__(daemon=True)
        self.owners = owners
        self.stop = threading.Event()
        self.failed: list[list[float]] = [[] for _ in range(PARTITIONS)]

    def run(self) -> None:
        while not self.stop.wait(0.05):
            for p, client in self.owners.items():
                request = (
                    StateQueryRequest.in_store("counts")
                    .with_query(KeyQuery.with_key(f"p{p}-0"))
                    .with_partitions({p})
                    .require_active()
                )
                result = client.query(request).partition_results.get(p)
                if result is None or not result.is_success():
                    self.failed[p].append(time.monotonic())

    def longest_outage(self, p: int) -> float:
        """The longest run of failed answers of partition ``p`` (first to last failure)."""
        longest, start, last = 0.0, None, None
        for t in self.failed[p]:
            start = t if start is None or last is None or t - last > 0.2 else start
            last = t
            longest = max(longest, last - start)
        return longest


def _input_diagnosis(bootstrap: str, source: str, sent: list[int]) -> str:
    """Whether the input topic holds what the feed sent, once each: tells an application that
    processed records twice from input written twice."""
    records = consume_all(bootstrap, source, sum(sent), timeout_s=20)
    per_partition = [sum(1 for r in records if r.partition == p) for p in range(PARTITIONS)]
    rounds = Counter((r.partition, r.value) for r in records)
    doubled = sorted((p, int(v or b"-1")) for (p, v), n in rounds.items() if n > 1)
    if per_partition == sent and not doubled:
        return "the input holds every record once: the application processed some twice"
    return (
        f"the input differs from what was sent: {per_partition} records, sent {sent}; "
        f"doubled (partition, round) {doubled[:20]}"
    )


def _owners(clients: list[KafkaStreams]) -> dict[int, int]:
    """Input partition -> index of the client whose worker runs its task."""
    return {int(t.split("_")[1]): i for i, c in enumerate(clients) for t in active_tasks(c)}


def _settled(clients: list[KafkaStreams]) -> dict[int, int] | None:
    owners = _owners(clients)
    counts = [sum(1 for o in owners.values() if o == i) for i in range(len(clients))]
    even = PARTITIONS // len(clients)
    return owners if len(owners) == PARTITIONS and counts == [even] * len(clients) else None


def _config(bootstrap: str, state_dir: Path, app_id: str) -> StreamsConfig:
    return app_config(
        bootstrap,
        state_dir,
        app_id,
        statestore_cache_max_bytes=0,
        rebalance_protocol="cooperative",
    )


@pytest.mark.broker
@pytest.mark.apache_kafka  # both brokers: Tansu's JoinGroup hold and Kafka's quick rebalance differ
def test_tasks_that_keep_their_owner_keep_producing_while_a_third_instance_joins(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app_id = new_app_id("coop")
    third_instance_joins(
        bootstrap_servers, admin, lambda name: _config(bootstrap_servers, tmp_path / name, app_id)
    )


def third_instance_joins(
    bootstrap: str, admin: KafkaAdmin, config_of: Callable[[str], StreamsConfig]
) -> list[int]:
    """The scenario of the module docstring with the instances' configs ``config_of("a")``,
    ``("b")``, ``("c")`` (one application); returns the partitions whose task kept its owner."""
    source, sink = new_topic(admin, PARTITIONS, "in"), new_topic(admin, PARTITIONS, "out")
    feed, watch = _Feed(bootstrap, source), _Watch(bootstrap, sink)
    clients: list[KafkaStreams] = []
    try:
        for name in ("a", "b"):
            clients.append(KafkaStreams(count_app(source, sink).build(), config_of(name)))
            clients[-1].start()
        for c in clients:
            c.wait_for_state(State.RUNNING, timeout_s=90)
        feed.start()
        watch.start()
        # both instances run three tasks: the first one alone may run all six for a moment
        before = wait_until(lambda: _settled(clients), 60, "two instances run three tasks each")
        wait_until(lambda: all(len(a) > 20 for a in watch.arrivals), 60, "every partition produces")
        ask = _Ask({p: clients[i] for p, i in before.items()})
        ask.start()
        joined = time.monotonic()
        clients.append(KafkaStreams(count_app(source, sink).build(), config_of("c")))
        clients[-1].start()
        after = wait_until(lambda: _settled(clients), 90, "three instances run two tasks each")
        settled = time.monotonic()
        time.sleep(2.0)  # outputs of the moved tasks' first commits
        ask.stop.set()
        gaps = watch.longest_gaps(joined, settled + 1.0)
        kept = [p for p in range(PARTITIONS) if before[p] == after[p]]
        moved = [p for p in range(PARTITIONS) if p not in kept]
        print(
            f"join settled after {settled - joined:.1f}s; longest gap per partition "
            f"{[round(g, 2) for g in gaps]}; kept {kept}, moved {moved}"
        )
        assert kept, "every task moved: nothing to measure"
        assert max(gaps[p] for p in kept) <= KEPT_BOUND_S, (
            f"tasks that kept their owner paused: {[round(gaps[p], 2) for p in kept]}"
        )
        # a kept task keeps answering queries as the running active (KIP-535)
        outages = {p: round(ask.longest_outage(p), 2) for p in kept}
        assert max(outages.values()) <= KEPT_BOUND_S, f"kept tasks refused active queries: {outages}"
        feed.stop.set()
        feed.join(30)
        expected = {f"p{p}-{k}": 0 for p in range(PARTITIONS) for k in range(50)}
        for p in range(PARTITIONS):
            for n in range(feed.sent[p]):
                expected[f"p{p}-{n % 50}"] += 1
        try:
            wait_until(lambda: watch.counts == expected, 30, "every count is exact")
        except AssertionError:
            wrong = {k: (watch.counts.get(k), n) for k, n in expected.items() if watch.counts.get(k) != n}
            shown = dict(sorted(wrong.items())[:12])
            raise AssertionError(
                f"counts (seen, expected) differ: {shown}; {_input_diagnosis(bootstrap, source, feed.sent)}"
            ) from None
        return kept
    finally:
        feed.stop.set()
        watch.stop.set()
        if "ask" in locals():
            ask.stop.set()
        for c in clients:
            c.close(timeout_s=60)
