"""``make demo``: the example app end to end on an embedded broker, in well under a minute.

Starts an embedded Tansu broker on a free port, creates the topics, produces sample
orders, runs :mod:`examples.orders_app` with :class:`KafkaStreams` in this process,
waits (with a deadline, never a blind sleep) until both output topics hold every
expected record, prints a summary and shuts everything down cleanly. Exit status 0
means the output was complete and the input offsets were committed.

    python -m examples.demo [--orders N] [--state-dir DIR]
"""

from __future__ import annotations

import argparse
import gc
import logging
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import orjson

from examples.orders_app import (
    BIG_ORDERS_TOPIC,
    ORDERS_BY_CUSTOMER_TOPIC,
    ORDERS_TOPIC,
    Order,
    build_topology,
    is_big,
)
from platform_streams import KafkaStreams, State, StreamsConfig, Topology
from platform_streams.errors import StreamsError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    EmbeddedBroker,
    KafkaAdmin,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
)

APPLICATION_ID = "orders-demo"
CONFIG_FILE = Path(__file__).with_name("orders.yaml")
PARTITIONS = 4
CUSTOMERS = 100
DEADLINE_S = 45.0

#: topic -> [(partition, key, value)]
Output = dict[str, list[tuple[int, bytes | None, bytes | None]]]


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def sample_orders(count: int, seed: int = 7) -> list[tuple[str, Order]]:
    """Deterministic orders: ~18% are big (amount >= 100), a few need review (>= 500)."""
    rng = random.Random(seed)
    orders = []
    for i in range(count):
        order_id = f"o-{i:05d}"
        orders.append(
            (
                order_id,
                {
                    "order_id": order_id,
                    "customer": f"c-{rng.randrange(CUSTOMERS):03d}",
                    "amount": round(rng.lognormvariate(3.8, 0.9), 2),
                    "items": rng.randint(1, 5),
                },
            )
        )
    return orders


def produce_orders(bootstrap: str, orders: Iterable[tuple[str, Order]]) -> int:
    """Produce JSON orders keyed by order id; returns how many were acknowledged."""
    producer = create_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random"}
    )
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    sent = 0
    for key, order in orders:
        while True:
            try:
                producer.produce(ORDERS_TOPIC, orjson.dumps(order), key.encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
    if producer.flush(30) or failures:
        raise StreamsError(f"producing sample orders failed: {failures[:3] or 'flush timed out'}")
    return sent


def read_outputs(bootstrap: str, expected: dict[str, int], deadline: float) -> Output:
    """Read the output topics from the beginning until each holds ``expected`` records.

    No consumer group (``assign``), so nothing waits for a group join; returns whatever
    arrived by ``deadline`` and lets the caller judge completeness.
    """
    consumer = create_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "orders-demo-reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    out: Output = {topic: [] for topic in expected}
    try:
        consumer.list_topics(timeout=10)  # all-topics metadata: offsets resolve at once
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in expected for p in range(PARTITIONS)])
        while time.monotonic() < deadline and any(len(out[t]) < n for t, n in expected.items()):
            for msg in consumer.consume(num_messages=1000, timeout=0.1):
                if msg.error() is None:
                    out[msg.topic() or ""].append((msg.partition() or 0, msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def run_app(
    topology: Topology, bootstrap: str, state_dir: Path, expected: dict[str, int]
) -> tuple[Output, float, bool, State]:
    """Run the app until the output is complete; returns (output, seconds, closed in time, final state).

    The client is dropped on return, so its Kafka clients are gone before the broker stops.
    """
    shutil.rmtree(state_dir, ignore_errors=True)
    config = StreamsConfig.load(
        CONFIG_FILE,
        env={},  # the demo runs on its own defaults, whatever the shell exports
        overrides={"application_id": APPLICATION_ID, "bootstrap_servers": bootstrap, "state_dir": state_dir},
    )
    streams = KafkaStreams(topology, config)
    t0 = time.monotonic()
    streams.start()
    try:
        streams.wait_for_state(State.RUNNING, timeout_s=30)
        joined = time.monotonic() - t0
        say(f"application '{APPLICATION_ID}' RUNNING after {joined:.1f}s (consumer-group join)")
        t1 = time.monotonic()
        output = read_outputs(bootstrap, expected, time.monotonic() + DEADLINE_S)
        took = time.monotonic() - t1
    finally:
        closed = streams.close(timeout_s=30)
    return output, took, closed, streams.state()


def run_demo(order_count: int, state_dir: Path) -> int:
    started = time.monotonic()
    orders = sample_orders(order_count)
    expected_big = sum(1 for key, order in orders if is_big(key, order))
    expected = {BIG_ORDERS_TOPIC: expected_big, ORDERS_BY_CUSTOMER_TOPIC: order_count}

    with EmbeddedBroker(kill_with_parent=True) as broker:
        bootstrap = broker.bootstrap_servers
        say(f"embedded Kafka broker (Tansu, in memory) ready at {bootstrap}")
        with KafkaAdmin(bootstrap) as admin:
            admin.create_topics(
                [TopicSpec(t, PARTITIONS) for t in (ORDERS_TOPIC, BIG_ORDERS_TOPIC, ORDERS_BY_CUSTOMER_TOPIC)]
            )
        t0 = time.monotonic()
        produced = produce_orders(bootstrap, orders)
        say(f"produced {produced:,} orders to '{ORDERS_TOPIC}' in {time.monotonic() - t0:.2f}s")

        topology = build_topology()
        output, took, closed, final_state = run_app(topology, bootstrap, state_dir, expected)
        gc.collect()  # the client's producer/consumer sit in reference cycles: free them now
        with KafkaAdmin(bootstrap) as admin:
            committed = admin.committed_offsets(
                APPLICATION_ID, [(ORDERS_TOPIC, p) for p in range(PARTITIONS)]
            )
        committed_total = sum(o or 0 for o in committed.values())

    complete = all(len(output[t]) == n for t, n in expected.items())
    print_summary(
        produced=produced,
        output=output,
        expected=expected,
        took=took,
        topology=str(topology.describe()),
        bootstrap=bootstrap,
        state_dir=state_dir,
        committed_total=committed_total,
    )
    ok = complete and closed and final_state is State.NOT_RUNNING and committed_total == produced
    say(
        f"{'OK' if ok else 'FAILED'}: closed cleanly={closed}, final state {final_state.value}, "
        f"total {time.monotonic() - started:.1f}s"
    )
    return 0 if ok else 1


def print_summary(
    *,
    produced: int,
    output: Output,
    expected: dict[str, int],
    took: float,
    topology: str,
    bootstrap: str,
    state_dir: Path,
    committed_total: int,
) -> None:
    big = output[BIG_ORDERS_TOPIC]
    by_customer = output[ORDERS_BY_CUSTOMER_TOPIC]
    # Repartitioning by customer must put every customer's orders on one partition.
    partitions_per_customer = {k: len(ps) for k, ps in _partitions_by_key(by_customer).items()}
    one_partition = all(n == 1 for n in partitions_per_customer.values())
    tiers = Counter(orjson.loads(v or b"{}").get("tier") for _p, _k, v in big)
    print()
    print("=== platform_streams demo: examples/orders_app.py ===")
    print(topology.rstrip())
    print()
    print(f"records in : {produced:,} orders on '{ORDERS_TOPIC}'")
    for topic, want in expected.items():
        print(f"records out: {len(output[topic]):,} / {want:,} expected on '{topic}'")
    rate = (produced / took) if took > 0 else 0.0
    print(f"processing : output complete {took:.2f}s after RUNNING (~{rate:,.0f} input records/s)")
    print(f"big orders : {dict(sorted(tiers.items(), key=str))}")
    print(
        f"by customer: {len(partitions_per_customer)} customers, each on exactly one partition: "
        f"{'yes' if one_partition else 'NO'}"
    )
    print(f"committed  : input offsets {committed_total:,} / {produced:,} (group '{APPLICATION_ID}')")
    print("sample output:")
    for topic, records in ((BIG_ORDERS_TOPIC, big), (ORDERS_BY_CUSTOMER_TOPIC, by_customer)):
        for partition, key, value in records[:2]:
            print(f"  {topic}[{partition}] {(key or b'').decode()} -> {(value or b'').decode()}")
    print("where to look:")
    print(f"  broker     : {bootstrap} (embedded Tansu, in memory; gone when the demo exits)")
    print(f"  state dir  : {state_dir} (empty: this topology is stateless)")
    print("  the app    : examples/orders_app.py, config examples/orders.yaml")
    topics = ", ".join((ORDERS_TOPIC, BIG_ORDERS_TOPIC, ORDERS_BY_CUSTOMER_TOPIC))
    print(f"  run it     : on a broker with the topics {topics}:")
    print("               platform-streams run examples.orders_app:topology --config examples/orders.yaml \\")
    print("                   --set bootstrap.servers=HOST:PORT")
    print()


def _partitions_by_key(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, set[int]]:
    out: dict[bytes | None, set[int]] = {}
    for partition, key, _value in records:
        out.setdefault(key, set()).add(partition)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=10_000, help="sample orders to produce (default 10000)")
    parser.add_argument("--state-dir", type=Path, default=Path("state/demo"), help="default ./state/demo")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return run_demo(args.orders, args.state_dir.resolve())
    except StreamsError as exc:
        say(f"FAILED: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
