"""A cached table's flushed updates reach its children through one generated call.

``fusion.compile_pair_entry`` / ``NodeContext.pair_forward_fn``: a table processor whose
store caches hands each flushed update ``(key, new, old, timestamp)`` to a function compiled
with its children's fused code, instead of its ``emit`` closure building a ``Change`` and
calling the child's own entry. A ``KTable.to_stream`` child reads ``new`` without a
``Change`` built; any other child still gets the ``Change``. What the children receive must
be what they receive without fusion (``fusion=False``: the plain closures, the layered
``emit``), in the same order; Kafka Streams' ``KTableSource``/``KStreamAggregate`` forward a
``Change`` through ``TimestampedCacheFlushListener`` the same way (apache/kafka
streams/src/main/java/org/apache/kafka/streams/kstream/internals/TimestampedCacheFlushListener.java).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.serde import Integer, String
from platform_streams.testing.records import DriverRecord
from tests.support.tasks import build_tasks

S, INT = String(), Integer()


def _run(topology: Topology, tmp_path: Path, *, fusion: bool) -> tuple[list[tuple[Any, ...]], Any]:
    """Feed updates of three keys (one deleted by a None count input: dropped), flush twice;
    returns what the sinks sent and the one task."""
    (task,), collector = build_tasks(
        topology, tmp_path, "pair", default_key_serde=S, default_value_serde=INT, fusion=fusion
    )
    rows = [(b"a", 1), (b"b", 2), (b"a", 3), (b"c", None), (b"c", 4), (b"b", 5)]
    records = [
        DriverRecord("in", 0, i, k, None if v is None else INT.serialize(v), 100 + i)
        for i, (k, v) in enumerate(rows)
    ]
    task.add_records(("in", 0), records[:3])
    task.process(3)
    task.flush_caches()
    task.add_records(("in", 0), records[3:])
    task.process(3)
    task.flush_caches()
    return [(t, k, v, ts) for t, k, v, ts, _h, _p in collector.sent], task


def _listener(task: Any) -> Any:
    """The flush listener the table processor installed on its store."""
    (processor,) = [p for p in task.graph.processors.values() if getattr(p, "store", None) is not None]
    return processor.store._listener


def test_a_cached_count_to_a_sink_is_one_call_without_a_change_built(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).group_by_key().count(
        materialized=Materialized.as_("counts")
    ).to_stream().to("out", Produced(key_serde=S, value_serde=INT))
    topology = builder.build()
    fused, task = _run(topology, tmp_path / "fused", fusion=True)
    plain, _ = _run(topology, tmp_path / "plain", fusion=False)
    assert fused == plain
    assert [(k, INT.deserialize(v), ts) for t, k, v, ts in fused if t == "out"] == [
        (b"a", 2, 102),
        (b"b", 1, 101),
        (b"c", 1, 104),  # the second flush in first-dirty order
        (b"b", 2, 105),
    ]
    source = _listener(task).__ps_source__
    assert source.startswith("def _pair(k, new, old, ts"), source
    assert "(new, old)" not in source  # no Change: the sink takes ``new`` itself
    assert "\n    h = None" in source


def test_children_that_take_the_change_get_it_and_see_what_they_see_without_fusion(tmp_path: Path) -> None:
    """A filtered table (a table processor: it takes the ``Change``, old value included) and a
    to_stream mapped on, both children of one cached count."""
    builder = StreamsBuilder()
    counts = (
        builder.stream("in", Consumed(key_serde=S, value_serde=INT))
        .group_by_key()
        .count(materialized=Materialized.as_("counts"))
    )
    counts.filter(lambda k, v: v % 2 == 0).to_stream().to("even", Produced(key_serde=S, value_serde=INT))
    counts.to_stream().map_values(lambda v: v * 10).to("tens", Produced(key_serde=S, value_serde=INT))
    topology = builder.build()
    fused, task = _run(topology, tmp_path / "fused", fusion=True)
    plain, _ = _run(topology, tmp_path / "plain", fusion=False)
    assert fused == plain
    decoded = [
        (t, k, None if v is None else INT.deserialize(v), ts)
        for t, k, v, ts in fused
        if t in ("even", "tens")
    ]
    assert [row for row in decoded if row[0] == "tens"] == [
        ("tens", b"a", 20, 102),
        ("tens", b"b", 10, 101),
        ("tens", b"c", 10, 104),
        ("tens", b"b", 20, 105),
    ]
    # the filter forwards a tombstone for a key whose new count is odd (Kafka's KTableFilter)
    assert ("even", b"a", 2, 102) in decoded and ("even", b"b", 2, 105) in decoded
    source = _listener(task).__ps_source__
    assert "(new, old))" in source, source  # the filter's entry takes the Change


def test_without_caching_the_listener_forwards_each_write_with_its_headers(tmp_path: Path) -> None:
    """No cache: updates leave on every write, with the writing record's headers, through the
    processor's own ``emit`` (the fused call, which has no headers, is not installed)."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).group_by_key().count(
        materialized=Materialized.as_("counts")
    ).to_stream().to("out", Produced(key_serde=S, value_serde=INT))
    (task,), collector = build_tasks(
        builder.build(),
        tmp_path,
        "pair",
        default_key_serde=S,
        default_value_serde=INT,
        statestore_cache_max_bytes=0,
    )
    assert not hasattr(_listener(task), "__ps_source__")
    record = DriverRecord("in", 0, 0, b"a", INT.serialize(1), 100, headers=[("h", b"1")])
    task.add_records(("in", 0), [record])
    task.process(1)
    assert [(t, k, INT.deserialize(v), ts, h) for t, k, v, ts, h, _p in collector.sent if t == "out"] == [
        ("out", b"a", 1, 100, [("h", b"1")])
    ]


def test_a_cached_table_source_forwards_deletes_through_the_fused_call(tmp_path: Path) -> None:
    """A table source (``KTableSource``) with a cache: a tombstone's flushed update reaches
    the sink as a None value, with the deleting record's timestamp, as without fusion."""
    builder = StreamsBuilder()
    builder.table("in", Consumed(key_serde=S, value_serde=INT), Materialized.as_("rows")).to_stream().to(
        "out", Produced(key_serde=S, value_serde=INT)
    )
    topology = builder.build()
    fused, task = _run(topology, tmp_path / "fused", fusion=True)
    plain, _ = _run(topology, tmp_path / "plain", fusion=False)
    assert fused == plain
    out = [(k, None if v is None else INT.deserialize(v), ts) for t, k, v, ts in fused if t == "out"]
    # first flush: a=3, b=2; second: c deleted (never flushed: nothing to tell), then c=4, b=5
    assert out == [(b"a", 3, 102), (b"b", 2, 101), (b"c", 4, 104), (b"b", 5, 105)]
    assert "(new, old)" not in _listener(task).__ps_source__


def test_a_flushed_delete_of_a_flushed_row_is_a_tombstone(tmp_path: Path) -> None:
    """A row that reached the store, deleted afterwards: its flushed tombstone (the layered
    path of the flush, then the fused call) arrives as a None value in both modes."""
    builder = StreamsBuilder()
    builder.table("in", Consumed(key_serde=S, value_serde=INT), Materialized.as_("rows")).to_stream().to(
        "out", Produced(key_serde=S, value_serde=INT)
    )
    results = []
    for fusion in (True, False):
        (task,), collector = build_tasks(
            builder.build(),
            tmp_path / str(fusion),
            "pair",
            default_key_serde=S,
            default_value_serde=INT,
            fusion=fusion,
        )
        task.add_records(("in", 0), [DriverRecord("in", 0, 0, b"a", INT.serialize(1), 100)])
        task.process(1)
        task.flush_caches()
        task.add_records(("in", 0), [DriverRecord("in", 0, 1, b"a", None, 107)])
        task.process(1)
        task.flush_caches()
        results.append([(k, v, ts) for t, k, v, ts, _h, _p in collector.sent if t == "out"])
    assert results[0] == results[1] == [(b"a", INT.serialize(1), 100), (b"a", None, 107)]
