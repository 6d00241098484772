"""The direct cache paths send exactly what the layered paths send.

``state/wrappers/direct_flush_path.py`` replaces, for the DSL's usual store stack,
the flush that goes entry by entry down the layers (caching -> change-logging -> bytes
store) and back up to the processor (metered listener -> timestamped store -> ``emit``).
The layered flush is Kafka Streams' (``CachingKeyValueStore.putAndMaybeForward`` ->
``ChangeLoggingKeyValueBytesStore.put`` -> ``TimestampedCacheFlushListener``); the direct one
must not differ in any record: these tests run the same topology and input twice, with
the direct flush and with it switched off, and compare every record sent to every topic
(output, changelog, repartition) with its key, value, timestamp and headers, in order.
The stream aggregations' one-call read-compute-write (``direct_aggregate``, Kafka's
``KStreamAggregateProcessor.process``: ``store.get`` -> aggregator -> ``store.put``; and
``direct_window_aggregate``, ``KStreamWindowAggregate``) is switched off with it, and so
is the emit-final read of a burst of closed windows in one call (``closed_window_reader``,
Kafka's ``maybeForwardFinalResult`` reading each closed window from the store). Window
stores flush the same way (``CachingWindowStore._flush_entries`` writes the cache's binary
window key straight to the bytes store and the changelog, Kafka's
``CachingWindowStore.putAndMaybeForward`` -> ``ChangeLoggingWindowBytesStore.put``).

A stream aggregation's step on a key cached decoded also runs in line in the fused source
(``state/wrappers/aggregate_fragment.py``, for ``Bytes`` keys): the topologies keyed by
``Bytes`` check that it sends what the step and the layered path send, and that the fused
source really holds it; switched off, the source calls the step.

The topologies make flushes of many entries (a flat_map fanning one record out to several
keys; a cache so small that puts evict dirty entries mid-record) and cover the entries the
direct loop hands back to the layered path (deletes, a table's tombstones) and the old
values a ``KTable.groupBy`` needs (``send_old_values``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

import platform_streams.dsl.internals.window_processors as window_processors
import platform_streams.state.timestamped_kv_store as timestamped_kv_store
import platform_streams.state.timestamped_window_store as timestamped_window_store
from platform_streams.dsl import (
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    Produced,
    StreamsBuilder,
    TimeWindows,
)
from platform_streams.serde import Bytes, Double, Json, Long, String
from platform_streams.state.cache import DECODED_OVERHEAD_BYTES, ENTRY_OVERHEAD_BYTES
from platform_streams.state.timestamped_window_store import DslWindowStore
from platform_streams.state.window_store import WindowBytesStore
from platform_streams.state.wrappers.caching_windowed import CachingWindowStore
from platform_streams.testing import TopologyTestDriver
from tests.support.windowed_apps import bytes_windowed_long

S = String()
B = Bytes()
Topology = Callable[[StreamsBuilder], None]


def _fan_out_count(builder: StreamsBuilder) -> None:
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .flat_map(lambda k, v: [(f"{k}-{i}", v) for i in range(4)])
        .group_by_key()
        .count(materialized=Materialized.as_("counts"))
        .to_stream()
        .to("out", Produced(key_serde=S, value_serde=Long()))
    )


def _reduce(builder: StreamsBuilder) -> None:
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .flat_map(lambda k, v: [(k, v), (v, k)])
        .group_by_key()
        .reduce(lambda agg, v: agg + v if len(agg) < 20 else v, materialized=Materialized.as_("joined"))
        .to_stream()
        .to("out", Produced(key_serde=S, value_serde=S))
    )


def _aggregate_with_deletes(builder: StreamsBuilder) -> None:
    """An aggregate that becomes None (a delete) and starts again from the initializer."""
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .filter(lambda k, v: v is not None)
        .group_by_key()
        .aggregate(
            lambda: 0,
            lambda k, v, agg: None if agg is not None and agg >= 3 and v.startswith("a") else (agg or 0) + 1,
            materialized=Materialized.as_("sums").with_value_serde(Long()),
        )
        .to_stream()
        .to("out", Produced(key_serde=S, value_serde=Long()))
    )


def _bytes_key_count(builder: StreamsBuilder) -> None:
    """A count keyed by raw bytes: the fragment's usual case (a Long aggregate packed in C)."""
    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .flat_map(lambda k, v: [(k + b"-%d" % i, v) for i in range(3)])
        .group_by_key(Grouped(key_serde=B, value_serde=S))
        .count(materialized=Materialized.as_("counts"))
        .to_stream()
        .to("out", Produced(key_serde=B, value_serde=Long()))
    )


def _bytes_key_json_aggregate(builder: StreamsBuilder) -> None:
    """A Json aggregate that is an int (kept decoded), then a list (not kept: the store's put)
    or None (a delete), then starts again: every branch of the fragment."""

    def add(k: bytes, v: str, agg: Any) -> Any:
        if isinstance(agg, int) and agg >= 4:
            return None if v.startswith("a") else [agg, v]
        return 1 if isinstance(agg, list) else agg + 1

    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .group_by_key(Grouped(key_serde=B, value_serde=S))
        .aggregate(lambda: 0, add, materialized=Materialized.as_("json").with_value_serde(Json()))
        .to_stream()
        .to("out", Produced(key_serde=B, value_serde=Json()))
    )


def _bytes_key_first_kinds(builder: StreamsBuilder) -> None:
    """A key's first aggregate of every kind the fragment's new-key path meets: an int (kept
    decoded, written in line), a list (not kept: the store's put) and None (a delete); the
    initializer counts its calls, so a first aggregate computed twice would show."""
    calls = [0]

    def initial() -> int:
        calls[0] += 1
        return calls[0]

    def add(k: bytes, v: str, agg: Any) -> Any:
        if v.startswith("e"):
            return None
        if v.startswith("d") or isinstance(agg, list):
            return [agg, v]
        return agg + 1

    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .group_by_key(Grouped(key_serde=B, value_serde=S))
        .aggregate(initial, add, materialized=Materialized.as_("firsts").with_value_serde(Json()))
        .to_stream()
        .to("out", Produced(key_serde=B, value_serde=Json()))
    )


def _bytes_key_double_sum(builder: StreamsBuilder) -> None:
    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .group_by_key(Grouped(key_serde=B, value_serde=S))
        .aggregate(
            lambda: 0.0,
            lambda k, v, agg: agg + len(v) / 4,
            materialized=Materialized.as_("sums").with_value_serde(Double()),
        )
        .to_stream()
        .to("out", Produced(key_serde=B, value_serde=Double()))
    )


def _bytes_key_windowed_sum(builder: StreamsBuilder, final: bool) -> None:
    """Tumbling windows keyed by raw bytes, a Long sum that becomes None (a delete) and
    starts again: the window fragment's every branch (window_fragment.py)."""
    bytes_windowed_long(
        builder,
        lambda k, v, agg: None if agg > 2 and v is not None and v.startswith("a") else agg + 2,
        size_ms=100,
        grace_ms=30,
        final=final,
        out_serde=S,
        out_value=str,
    )


def _bytes_key_windowed_final(builder: StreamsBuilder) -> None:
    _bytes_key_windowed_sum(builder, final=True)


def _bytes_key_windowed_eager(builder: StreamsBuilder) -> None:
    _bytes_key_windowed_sum(builder, final=False)


#: the topologies whose input records carry headers (the window fragment sets the
#: processor's current headers around its write, as ``process`` does)
_WITH_HEADERS = (_bytes_key_windowed_final, _bytes_key_windowed_eager)

#: the topologies whose aggregation the fused source runs in line (``aggregate_fragment``,
#: ``window_fragment``)
_IN_LINE = (
    _bytes_key_count,
    _bytes_key_json_aggregate,
    _bytes_key_first_kinds,
    _bytes_key_double_sum,
    _bytes_key_windowed_final,
    _bytes_key_windowed_eager,
)


def _table_regroup(builder: StreamsBuilder) -> None:
    """A cached source table with tombstones, re-grouped: its flushes need old values."""
    table = builder.table("in", Consumed(key_serde=S, value_serde=S), Materialized.as_("source"))
    (
        table.group_by(lambda k, v: (v[:1], v), Grouped(key_serde=S, value_serde=S))
        .aggregate(
            lambda: "",
            lambda k, v, agg: (agg + v)[-30:],
            lambda k, v, agg: agg.replace(v, "", 1),
            materialized=Materialized.as_("by-initial").with_value_serde(S),
        )
        .to_stream()
        .to("out", Produced(key_serde=S, value_serde=S))
    )


def _windowed_aggregate(builder: StreamsBuilder, final: bool, hopping: bool | None = None) -> None:
    windows = TimeWindows.of_size_and_grace(100, 50)
    hopping = not final if hopping is None else hopping
    windowed = (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .flat_map(lambda k, v: [(f"{k}-{i}", v) for i in range(3)] if v is not None else [])
        .group_by_key()
        .windowed_by(windows.advance_by(40) if hopping else windows)  # hopping: 3 windows a record
    )
    if final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    (
        windowed.aggregate(
            lambda: "",
            lambda k, v, agg: None if len(agg) > 8 and v.startswith("a") else agg + v[:1],
            materialized=Materialized.as_("windows").with_value_serde(S),
        )
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.window.start_ms}", str(n)))
        .to("out", Produced(key_serde=S, value_serde=S))
    )


def _windowed_double_sum(builder: StreamsBuilder) -> None:
    """A Double sum, emitted final: the window step's C pack and unpack of ``(timestamp, sum)``
    (``ValueAndTimestampSerde.fixed_packer``/``fixed_unpacker``)."""
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(100, 20))
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(
            lambda: 0.0,
            lambda k, v, agg: agg + (len(v) if v is not None else 0.5),
            materialized=Materialized.as_("sums").with_value_serde(Double()),
        )
        .to_stream()
        .map(lambda w, total: (f"{w.key}@{w.window.start_ms}", str(total)))
        .to("out", Produced(key_serde=S, value_serde=S))
    )


def _windowed_eager(builder: StreamsBuilder) -> None:
    _windowed_aggregate(builder, final=False)


def _windowed_final(builder: StreamsBuilder) -> None:
    _windowed_aggregate(builder, final=True)


#: emit-final topologies: their closed windows are read in one call (``closed_window_reader``)
def _windowed_hopping_final(builder: StreamsBuilder) -> None:
    """Hopping windows emitted final: several windows of a key close at one record."""
    _windowed_aggregate(builder, final=True, hopping=True)


_FINAL = (_windowed_final, _windowed_hopping_final, _windowed_double_sum, _bytes_key_windowed_final)


def _count_closed_reads(monkeypatch: pytest.MonkeyPatch, direct: bool) -> list[bool]:
    """Switch the closed-window reader off (``direct`` False) or count its bursts: True for a
    burst it read, False for one it handed back to the store's own reads."""
    reads: list[bool] = []
    reader = DslWindowStore.closed_window_reader

    def counting(store: DslWindowStore) -> Any:
        open_reads = reader(store)
        if open_reads is None:
            return None

        def counted(final: list[bytes] | None) -> Any:
            fetch = open_reads(final)
            reads.append(fetch is not None)
            return fetch

        return counted

    monkeypatch.setattr(DslWindowStore, "closed_window_reader", counting if direct else lambda store: None)
    return reads


def _run(topology: Topology, cache_bytes: int, direct: bool, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    windowed = topology in (_windowed_eager, _bytes_key_windowed_eager, *_FINAL)
    closed_reads = _count_closed_reads(monkeypatch, direct)
    if not direct:
        monkeypatch.setattr(timestamped_kv_store, "direct_flush", lambda *args: None)
        monkeypatch.setattr(timestamped_kv_store, "direct_aggregate", lambda *args: None)
        monkeypatch.setattr(timestamped_kv_store, "aggregate_fragment", lambda *args: None)
        monkeypatch.setattr(window_processors, "window_fragment", lambda *args: None)
        monkeypatch.setattr(timestamped_window_store, "direct_window_aggregate", lambda *args: None)
        monkeypatch.setattr(CachingWindowStore, "_flush_entries", CachingWindowStore._layered_flush)
    binary_puts = []
    binary_writer = WindowBytesStore.binary_writer

    def counting_writer(store: WindowBytesStore) -> Any:
        write = binary_writer(store)
        return lambda *a: (binary_puts.append(1), write(*a))

    monkeypatch.setattr(WindowBytesStore, "binary_writer", counting_writer)
    builder = StreamsBuilder()
    topology(builder)
    config = {
        "application_id": "direct-flush",
        "statestore_cache_max_bytes": cache_bytes,
        "default_key_serde": "string",
        "default_value_serde": "string",
    }
    rng = random.Random(17)
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        for i in range(200):
            key = f"k{rng.randrange(12)}"
            value = None if rng.random() < 0.1 else rng.choice("abcde") + str(rng.randrange(5))
            headers = [("n", b"%d" % i)] if topology in _WITH_HEADERS else None
            source.pipe_input(key, value, 1_000 + i * 7 + rng.randrange(-40, 40), headers)
        used = bool(binary_puts) if windowed else _uses_direct_flush(driver)
        _assert_sizes_add_up(driver)
        if topology in _IN_LINE:
            assert _runs_in_line(driver) is direct
        sent = []
        for topic in sorted(driver.produced_topic_names()):
            for record in driver.create_output_topic(topic, Bytes(), Bytes()).read_records_to_list():
                sent.append((topic, record.key, record.value, record.timestamp, record.headers))
    assert used is direct
    if topology in _FINAL:  # the direct run read the closed windows in bursts, all of them
        assert (bool(closed_reads) and all(closed_reads)) is direct
    return sent


def _assert_sizes_add_up(driver: TopologyTestDriver) -> None:
    """Each named cache's size is what its entries are charged (``NamedCache.put``): the
    paths that write entries in line keep the accounting the cache's own methods keep."""
    budgets = {}
    for task in driver._tasks:
        for store in task.context.stores.values():
            layer = store
            while layer is not None:
                cache = getattr(layer, "_cache", None)
                if cache is not None and hasattr(cache, "_parent"):
                    budgets[id(cache._parent)] = cache._parent
                layer = getattr(layer, "wrapped", None)
    assert budgets
    for budget in budgets.values():
        for cache in budget._caches.values():
            charged = sum(
                len(key)
                + len(value or b"")
                + ENTRY_OVERHEAD_BYTES
                + (DECODED_OVERHEAD_BYTES if decoded is not None else 0)
                for key, (value, _, decoded) in cache._entries.items()
            )
            assert cache.size_bytes == charged, cache.name
            assert set(cache._dirty) <= set(cache._entries), cache.name
        assert budget.size_bytes == sum(cache.size_bytes for cache in budget._caches.values())
        assert budget.size_bytes <= budget.max_bytes  # every path checked the budget after writing


def _uses_direct_flush(driver: TopologyTestDriver) -> bool:
    caching = []
    for task in driver._tasks:
        for store in task.context.stores.values():
            metered = getattr(store, "wrapped", None)
            below = getattr(metered, "wrapped", None)
            if hasattr(below, "direct_flush"):
                caching.append(below.direct_flush is not None)
    assert caching and len(set(caching)) == 1
    return caching[0]


def _runs_in_line(driver: TopologyTestDriver) -> bool:
    """Whether the fused sources (a record's function and the batch) hold an aggregation's
    step in line (the cache's move, bound before the records)."""
    graphs = [task.graph for task in driver._tasks]
    return any(
        all(".move_to_end" in fn.__ps_source__ for fn in [*graph.sources.values(), *graph.batches.values()])
        for graph in graphs
    )


@pytest.mark.parametrize("cache_bytes", [10 * 1024 * 1024, 700])
@pytest.mark.parametrize(
    "topology",
    [
        _fan_out_count,
        _reduce,
        _aggregate_with_deletes,
        *_IN_LINE,
        _table_regroup,
        _windowed_eager,
        _windowed_final,
        _windowed_hopping_final,
        _windowed_double_sum,
    ],
)
def test_the_direct_paths_send_what_the_layered_paths_send(
    topology: Topology, cache_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = _run(topology, cache_bytes, True, monkeypatch)
    layered = _run(topology, cache_bytes, False, monkeypatch)
    if topology in _WITH_HEADERS:  # the aggregate turned None (a delete) at least once
        assert any(topic.endswith("-changelog") and value is None for topic, _, value, *_ in direct)
    topics = {record[0] for record in direct}
    assert any(topic.endswith("-changelog") for topic in topics) and "out" in topics
    assert len(direct) > 200
    assert direct == layered


def _grouped_pack_sum(key_serde: Any, windowed: bool) -> Callable[[StreamsBuilder, Any], None]:
    """A Long aggregate that becomes ``bad`` on the value "big": grouped by key, or in
    tumbling windows (the window fragment's pack, with Bytes keys)."""

    def topology(builder: StreamsBuilder, bad: Any) -> None:
        grouped = builder.stream("in", Consumed(key_serde=key_serde, value_serde=S)).group_by_key(
            Grouped(key_serde=key_serde, value_serde=S)
        )
        aggregated = (
            grouped.windowed_by(TimeWindows.of_size_and_grace(100, 0)) if windowed else grouped
        ).aggregate(
            lambda: 0,
            lambda k, v, agg: bad if v == "big" else agg + 1,
            materialized=Materialized.as_("sums").with_value_serde(Long()),
        )
        stream = aggregated.to_stream()
        if windowed:
            stream = stream.select_key(lambda w, n: w.key)
        stream.to("out", Produced(key_serde=key_serde, value_serde=Long()))

    return topology


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("case", ["grouped", "grouped-bytes", "windowed-bytes"])
def test_an_aggregate_the_fixed_pack_refuses_gets_the_serde_error(
    direct: bool, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``direct_aggregate`` (and the fragments in line, for Bytes keys) pack a Long aggregate
    with its timestamp in C (``ValueAndTimestampSerde.fixed_packer``); one out of range, or
    not a number, takes the serde's own path and error, as ``ValueAndTimestampSerde.serialize``
    does."""
    if not direct:
        monkeypatch.setattr(timestamped_kv_store, "direct_aggregate", lambda *args: None)
        monkeypatch.setattr(timestamped_kv_store, "aggregate_fragment", lambda *args: None)
        monkeypatch.setattr(timestamped_window_store, "direct_window_aggregate", lambda *args: None)
        monkeypatch.setattr(window_processors, "window_fragment", lambda *args: None)
    key_serde = S if case == "grouped" else B
    key: Any = "k" if case == "grouped" else b"k"
    topology = _grouped_pack_sum(key_serde, windowed=case == "windowed-bytes")
    for bad in (2**63, "many"):
        builder = StreamsBuilder()
        topology(builder, bad)
        with TopologyTestDriver(builder.build(), {"application_id": "pack"}) as driver:
            source = driver.create_input_topic("in", key_serde, S)
            source.pipe_input(key, "one", 10)
            source.pipe_input(key, "two", 20)  # the window is cached now: the fragment's path
            with pytest.raises(Exception, match="Long serde cannot encode"):
                source.pipe_input(key, "big", 30)
