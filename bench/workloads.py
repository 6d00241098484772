"""The benchmark's inputs and workloads, as plain data and functions every engine calls.

Imported by the children of both interpreters (see :mod:`bench.common`): stdlib and orjson only.

Inputs are ~100-byte JSON orders ``{"id":..,"user":"user-00456","sku":"sku-23456",
"amount":78.72,"currency":"EUR","ts":..}`` whose record timestamp is ``base_ts + i`` ms (one
record per millisecond of event time, so 1,000,000 records span ~17 minutes), where
``base_ts`` is :data:`EVENT_TIME_START_MS`, the same for every engine and broker. ``orders``
has 10,000 keys (``user-NNNNN``, 10 bytes); ``unique_orders`` gives every record its own
key (``order-NNNNNNNN``), so a count store ends with one entry per record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

_CURRENCIES = ("EUR", "USD", "GBP", "JPY")
#: keys of the ``orders`` input
ORDER_KEYS = 10_000
#: tumbling window of the windowed sum (no grace: a window closes when stream time passes its end)
WINDOW_MS = 60_000
#: event time of the first input record: one window after the epoch, not "now". Java Kafka
#: Streams' first emit-final scan of a windowed aggregation (KStreamWindowAggregate
#: ``maybeForwardFinalResult``: ``fetchAll(-1, closeTime - size)`` while no window was
#: emitted yet) walks its record cache one store segment (here 60 s) at a time from time 0:
#: ~30 million empty segments per task on real epoch timestamps, which never finished on
#: this machine. Event time near 0 gives every engine the same records and the same
#: windows and lets that scan cost what it costs once the application has emitted before.
#: (Input and output topics are created without time retention: Apache Kafka would delete
#: records this old.)
EVENT_TIME_START_MS = WINDOW_MS


@dataclass(frozen=True)
class InputSpec:
    """How record ``i`` of an input looks."""

    name: str
    key: Callable[[int], bytes]
    #: "json" (the bytes of :func:`order_value`) or "avro" (those orders as :data:`ORDER_AVRO`
    #: records through the Schema Registry, Confluent wire format; bench/run.py encodes them)
    encoding: str = "json"

    def value(self, i: int, base_ts: int) -> bytes:
        return order_value(i, base_ts + i)

    @staticmethod
    def timestamp(i: int, base_ts: int) -> int:
        return base_ts + i


def order_value(i: int, ts: int) -> bytes:
    return orjson.dumps(
        {
            "id": i,
            "user": f"user-{i % 1000:04d}",
            "sku": f"sku-{i % 50_000:05d}",
            "amount": (i * 37 % 10_000) / 100,
            "currency": _CURRENCIES[i % 4],
            "ts": ts,
        }
    )


ORDERS = InputSpec("orders", lambda i: f"user-{i % ORDER_KEYS:05d}".encode())
ORDERS_AVRO = InputSpec("orders_avro", ORDERS.key, encoding="avro")


def _avro_record(name: str, fields: dict[str, str]) -> str:
    typed = [{"name": f, "type": t} for f, t in fields.items()]
    return orjson.dumps({"type": "record", "name": name, "namespace": "bench", "fields": typed}).decode()


#: the Avro schemas of an order and of :func:`to_cents`' output
ORDER_AVRO = _avro_record(
    "Order",
    {"id": "long", "user": "string", "sku": "string", "amount": "double", "currency": "string", "ts": "long"},
)
CENTS_AVRO = _avro_record("Cents", {"id": "long", "user": "string", "cents": "long", "ccy": "string"})
#: ``RunSpec.config`` key (not a StreamsConfig field): the registry URL of an Avro workload
REGISTRY_URL = "bench_schema_registry_url"
UNIQUE_ORDERS = InputSpec("unique_orders", lambda i: f"order-{i:08d}".encode())


# -- the per-record work, shared by every engine ------------------------------------------


def big_order(key: Any, value: dict[str, Any]) -> bool:
    return value["amount"] >= 25.0  # keeps ~75%


def to_cents(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": value["id"],
        "user": value["user"],
        "cents": int(value["amount"] * 100),
        "ccy": value["currency"],
    }


def add_amount(key: Any, value: dict[str, Any], total: float) -> float:
    """The windowed sum's aggregator (Kafka Streams' argument order)."""
    return total + value["amount"]


def window_result(start: int, total: float) -> dict[str, Any]:
    """The windowed sum's output value, shaped like Quix Streams' window results."""
    return {"start": start, "end": start + WINDOW_MS, "value": total}


@dataclass(frozen=True)
class Workload:
    """One benchmark case: an input, what is computed, and under which guarantee."""

    name: str
    #: "stateless" | "count" | "window_sum"
    kind: str
    input: InputSpec
    description: str
    #: "at_least_once" | "exactly_once"
    guarantee: str = "at_least_once"
    #: the same in every engine (see RESULTS.md for why)
    commit_interval_ms: int = 5_000
    #: after each processing run, rebuild the state from its changelog and time that too
    restore: bool = False
    #: engines this workload runs on (None: all)
    engines: tuple[str, ...] | None = None
    # kept for bench/metrics_overhead.py, which builds the stateless app itself
    predicate: Callable[[Any, Any], bool] = big_order
    mapper: Callable[[Any], Any] = to_cents

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly_once"


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "filter_map_json",
            "stateless",
            ORDERS,
            "filter(amount >= 25) -> map_values(to cents) -> JSON out (~75% kept)",
        ),
        Workload(
            "filter_map_avro",
            "stateless",
            ORDERS_AVRO,
            "the same filter and map with Avro values through a Schema Registry (Apicurio, started"
            " by the bench), confluent-kafka's Avro serializers in both engines",
            engines=("raw_confluent", "platform_streams"),
        ),
        Workload(
            "count",
            "count",
            ORDERS,
            "count per key (10,000 keys), RocksDB store + changelog, at-least-once, 5 s commits",
        ),
        Workload(
            "count_eos_100ms",
            "count",
            ORDERS,
            "the same count under exactly-once, 100 ms commits (Kafka Streams' EOS default)",
            guarantee="exactly_once",
            commit_interval_ms=100,
        ),
        Workload(
            "count_alos_100ms",
            "count",
            ORDERS,
            "the same count at-least-once with 100 ms commits: the baseline of the EOS cost",
            commit_interval_ms=100,
        ),
        Workload(
            "window_sum",
            "window_sum",
            ORDERS,
            "tumbling 60 s window sum of amount per key, emitted once per window when it closes",
        ),
        Workload(
            "count_unique",
            "count",
            UNIQUE_ORDERS,
            "count per key with 1,000,000 distinct keys (every record a new store entry, output"
            " and changelog record in every engine); then the store restored from its changelog",
            restore=True,
        ),
    )
}


# -- what the right answer is (the harness checks every engine's output) --------------------


def expected_count_per_key(spec: InputSpec, records: int) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    key = spec.key
    for i in range(records):
        k = key(i)
        counts[k] = counts.get(k, 0) + 1
    return counts


def expected_stateless_outputs(records: int) -> int:
    return sum(1 for i in range(records) if (i * 37 % 10_000) / 100 >= 25.0)


def expected_window_sums(spec: InputSpec, records: int, base_ts: int) -> dict[tuple[bytes, int], float]:
    """(key, window start) -> sum, for every window (open or closed at the end of the input)."""
    sums: dict[tuple[bytes, int], float] = {}
    key = spec.key
    for i in range(records):
        ts = base_ts + i
        k = (key(i), ts - ts % WINDOW_MS)
        sums[k] = sums.get(k, 0.0) + (i * 37 % 10_000) / 100
    return sums
