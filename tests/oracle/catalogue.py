"""The differential catalogue, Python side: each topology here is written a second time in Java
(tools/kafka-streams-oracle/.../Catalogue.java) with the same name, parameters, topics
(``in``, ``in2``, ``tbl`` -> ``out``), store names and serdes.

Values are decimal strings or None (tombstones); keys are strings. A name is
``<family>`` or ``<family>_<variant>`` (``tumbling_suppress``, ``ssjoin_left``); the Java
side dispatches on the same split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from platform_streams.dsl import (
    BufferConfig,
    Consumed,
    EmitStrategy,
    Grouped,
    Joined,
    JoinWindows,
    KStream,
    KTable,
    Materialized,
    Produced,
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindowedSerde,
    TimeWindows,
)
from platform_streams.serde import Long, Serde, String
from platform_streams.state import Stores
from platform_streams.topology import Topology

S, L = String(), Long()
SS = Consumed(key_serde=S, value_serde=S)
Params = dict[str, int]
#: window stores keep a day: nothing a case stores expires, so stores compare exactly (Kafka
#: drops expired windows per segment, not per window: docs/oracle.md)
RETENTION_MS = 86_400_000
KEYS = ["a", "b", "c"]  # the keys generated cases use (tests/oracle/cases.py)


def iv(value: str) -> int:
    return int(value)


def s(value: Any) -> str:
    """Java's ``String.valueOf`` for the joiner: None prints as ``null``."""
    return "null" if value is None else str(value)


def joiner(left: Any, right: Any) -> str:
    return f"{s(left)}+{s(right)}"


@dataclass(frozen=True)
class Entry:
    """One catalogue topology: how to build it, what it reads, what it writes and stores."""

    build: Callable[[str, Params], Topology]
    inputs: tuple[str, ...]
    params: tuple[str, ...] = ()
    store: tuple[str, str] | None = None  # (name, "kv" | "window" | "session" | "versioned")
    key_serde: Callable[[Params], Serde] = lambda params: S
    value_serde: Serde = S


def _stateless(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    (
        b.stream("in", SS)
        .filter(lambda k, v: v is not None and iv(v) % 3 != 0)
        .map_values(lambda v: str(iv(v) * 2))
        .flat_map_values(lambda v: [v, v + "x"] if iv(v) % 4 == 0 else [v])
        .select_key(lambda k, v: v[0:1])
        .to("out", Produced(key_serde=S, value_serde=S))
    )
    return b.build()


def _merge(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    left = b.stream("in", SS).filter(lambda k, v: v is not None)  # built in Java's order (node names)
    other = b.stream("in2", SS).filter_not(lambda k, v: v is None or iv(v) > 6)
    left.merge(other).map_values(lambda v: v + "m").to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _grouped_stream(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    stream = b.stream("in", SS)
    table: KTable
    if name == "rekey":
        table = (
            stream.select_key(lambda k, v: "n" if v is None else str(iv(v) % 4))
            .group_by_key(Grouped(key_serde=S, value_serde=S))
            .count(materialized=Materialized.as_("counts"))
        )
    elif name == "count":
        table = stream.group_by_key().count(materialized=Materialized.as_("counts"))
    elif name == "reduce":
        table = stream.group_by_key().reduce(
            lambda x, y: str(iv(x) + iv(y)), materialized=Materialized.as_("sums")
        )
    else:
        table = stream.group_by_key().aggregate(
            lambda: 0,
            lambda k, v, agg: agg * 3 + iv(v),
            materialized=Materialized.as_("agg").with_value_serde(L),
        )
    table.to_stream().to("out", Produced(key_serde=S, value_serde=S if name == "reduce" else L))
    return b.build()


def _time_windowed(name: str, params: Params) -> Topology:
    kind, emit = name.split("_")
    size, grace = params["size"], params["grace"]
    b = StreamsBuilder()
    grouped = b.stream("in", SS).group_by_key()
    if kind == "tumbling":
        windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(size, grace))
    elif kind == "hopping":
        windowed = grouped.windowed_by(
            TimeWindows.of_size_and_grace(size, grace).advance_by(params["advance"])
        )
    else:
        windowed = grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(size, grace))
    return _windowed_count(b, windowed, emit, "wcounts", TimeWindowedSerde(S, size))


def _session(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    windows = SessionWindows.of_inactivity_gap_and_grace(params["gap"], params["grace"])
    windowed = b.stream("in", SS).group_by_key().windowed_by(windows)
    return _windowed_count(b, windowed, name.split("_")[1], "scounts", SessionWindowedSerde(S))


def _windowed_count(b: StreamsBuilder, windowed: Any, emit: str, store: str, key_serde: Serde) -> Topology:
    if emit == "final":
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    counts = windowed.count(materialized=Materialized.as_(store).with_retention(RETENTION_MS))
    if emit == "suppress":
        counts = counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    counts.to_stream().to("out", Produced(key_serde=key_serde, value_serde=L))
    return b.build()


def _ssjoin(name: str, params: Params) -> Topology:
    windows = JoinWindows.of_time_difference_and_grace(params["diff"], params["grace"]).after(params["after"])
    b = StreamsBuilder()
    left, right = b.stream("in", SS), b.stream("in2", SS)
    joined = StreamJoined(key_serde=S, value_serde=S, other_value_serde=S)
    method = {"inner": KStream.join, "left": KStream.left_join, "outer": KStream.outer_join}[
        name.split("_")[1]
    ]
    method(left, right, joiner, windows, joined).to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _stjoin(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    left, right = b.stream("in", SS), b.table("tbl", SS)
    joined = left.join(right, joiner) if name.endswith("inner") else left.left_join(right, joiner)
    joined.to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _vstjoin(name: str, params: Params) -> Topology:
    """KIP-914/923: a stream joined with a versioned table (100 ms of history) with a grace period."""
    b = StreamsBuilder()
    left = b.stream("in", SS)
    right = b.table("tbl", SS, Materialized.as_(Stores.persistent_versioned_key_value_store("vtbl", 100)))
    joined = Joined(key_serde=S, value_serde=S, other_value_serde=S).with_grace_period(params["grace"])
    method = KStream.join if name.endswith("inner") else KStream.left_join
    method(left, right, joiner, joined).to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _ttjoin(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    left, right = b.table("in", SS), b.table("tbl", SS)
    method = {"inner": KTable.join, "left": KTable.left_join, "outer": KTable.outer_join}[name.split("_")[1]]
    method(left, right, joiner).to_stream().to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _fkjoin(name: str, params: Params) -> Topology:
    """Foreign-key join: a row of ``in`` names a row of ``tbl`` by its value (key a, b or c)."""
    b = StreamsBuilder()
    left, right = b.table("in", SS), b.table("tbl", SS)

    def fk(v: str) -> str:
        return "abc"[iv(v) % 3]

    kind = name.split("_")[1]
    if kind == "inner":
        joined = left.join(right, fk, joiner)
    elif kind == "left":
        joined = left.left_join(right, fk, joiner)
    else:
        joined = left.left_join(
            right, fk, joiner, TableJoined.as_("fk"), Materialized.as_("fkres").with_value_serde(S)
        )
    joined.to_stream().to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _cogroup(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    g1, g2 = b.stream("in", SS).group_by_key(), b.stream("in2", SS).group_by_key()
    (
        g1.cogroup(lambda k, v, agg: agg + iv(v))
        .cogroup(g2, lambda k, v, agg: agg * 2 - iv(v))
        .aggregate(lambda: 0, materialized=Materialized.as_("cog").with_value_serde(L))
        .to_stream()
        .to("out", Produced(key_serde=S, value_serde=L))
    )
    return b.build()


def _tableops(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    table = b.table("tbl", SS)
    materialized = Materialized.as_("filtered") if name.endswith("mat") else None
    filtered = table.filter(lambda k, v: iv(v) % 2 == 0, materialized=materialized)
    filtered.map_values(lambda v: v + "!").to_stream().to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _tablegroup(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    grouped = b.table("tbl", SS).group_by(
        lambda k, v: (str(iv(v) % 3), v), Grouped(key_serde=S, value_serde=S)
    )
    if name.endswith("reduce"):
        table = grouped.reduce(
            lambda x, y: str(iv(x) + iv(y)),
            lambda x, y: str(iv(x) - iv(y)),
            materialized=Materialized.as_("tagg"),
        )
        table.to_stream().to("out", Produced(key_serde=S, value_serde=S))
    else:
        grouped.count(materialized=Materialized.as_("tagg")).to_stream().to(
            "out", Produced(key_serde=S, value_serde=L)
        )
    return b.build()


def _tablesource(name: str, params: Params) -> Topology:
    b = StreamsBuilder()
    b.table("tbl", SS, Materialized.as_("src")).to_stream().to("out", Produced(key_serde=S, value_serde=S))
    return b.build()


def _versioned(b: StreamsBuilder, topic: str, store: str) -> KTable:
    return b.table(topic, SS, Materialized.as_(Stores.persistent_versioned_key_value_store(store, 100)))


def _vtable(name: str, params: Params) -> Topology:
    """Versioned tables (KIP-889/914, 100 ms of history): an out-of-order update changes the
    history but is not forwarded downstream."""
    b = StreamsBuilder()
    kind = name.split("_", 1)[1]
    left = _versioned(b, "in", "vin") if kind == "join" else None
    table = _versioned(b, "tbl", "vsrc")
    out = Produced(key_serde=S, value_serde=S)
    if kind == "source":
        table.to_stream().to("out", out)
    elif kind == "ops":
        table.filter(lambda k, v: iv(v) % 2 == 0).map_values(lambda v: v + "!").to_stream().to("out", out)
    elif kind == "count":
        grouped = table.group_by(lambda k, v: (str(iv(v) % 3), v), Grouped(key_serde=S, value_serde=S))
        grouped.count(materialized=Materialized.as_("tagg")).to_stream().to(
            "out", Produced(key_serde=S, value_serde=L)
        )
    else:
        assert left is not None
        left.join(table, joiner).to_stream().to("out", out)
    return b.build()


def _time_key(params: Params) -> Serde:
    return TimeWindowedSerde(S, params["size"])


_WINDOW = ("size", "grace")
CATALOGUE: dict[str, Entry] = {
    "stateless": Entry(_stateless, ("in",)),
    "merge": Entry(_merge, ("in", "in2")),
    "rekey": Entry(_grouped_stream, ("in",), store=("counts", "kv"), value_serde=L),
    "count": Entry(_grouped_stream, ("in",), store=("counts", "kv"), value_serde=L),
    "reduce": Entry(_grouped_stream, ("in",), store=("sums", "kv")),
    "aggregate": Entry(_grouped_stream, ("in",), store=("agg", "kv"), value_serde=L),
    **{
        f"{kind}_{emit}": Entry(
            _time_windowed,
            ("in",),
            _WINDOW + (("advance",) if kind == "hopping" else ()),
            ("wcounts", "window"),
            _time_key,
            L,
        )
        for kind in ("tumbling", "hopping", "sliding")
        for emit in ("update", "suppress", "final")
    },
    **{
        f"session_{emit}": Entry(
            _session, ("in",), ("gap", "grace"), ("scounts", "session"), lambda p: SessionWindowedSerde(S), L
        )
        for emit in ("update", "suppress", "final")
    },
    **{
        f"ssjoin_{kind}": Entry(_ssjoin, ("in", "in2"), ("diff", "grace", "after"))
        for kind in ("inner", "left", "outer")
    },
    **{f"stjoin_{kind}": Entry(_stjoin, ("in", "tbl")) for kind in ("inner", "left")},
    **{f"ttjoin_{kind}": Entry(_ttjoin, ("in", "tbl")) for kind in ("inner", "left", "outer")},
    "fkjoin_inner": Entry(_fkjoin, ("in", "tbl")),
    "fkjoin_left": Entry(_fkjoin, ("in", "tbl")),
    "fkjoin_named": Entry(_fkjoin, ("in", "tbl"), store=("fkres", "kv")),
    # only inner: with a grace period Kafka's left join fails on a null stream key (its buffer
    # requires a key: NullPointerException); platform_streams joins such a record at once
    "vstjoin_inner": Entry(_vstjoin, ("in", "tbl"), ("grace",)),
    "cogroup": Entry(_cogroup, ("in", "in2"), store=("cog", "kv"), value_serde=L),
    "tableops_plain": Entry(_tableops, ("tbl",)),
    "tableops_mat": Entry(_tableops, ("tbl",), store=("filtered", "kv")),
    "tablegroup_reduce": Entry(_tablegroup, ("tbl",), store=("tagg", "kv")),
    "tablegroup_count": Entry(_tablegroup, ("tbl",), store=("tagg", "kv"), value_serde=L),
    "tablesource": Entry(_tablesource, ("tbl",), store=("src", "kv")),
    "vtable_source": Entry(_vtable, ("tbl",), store=("vsrc", "versioned")),
    "vtable_ops": Entry(_vtable, ("tbl",)),
    "vtable_count": Entry(_vtable, ("tbl",), store=("tagg", "kv"), value_serde=L),
    "vtable_join": Entry(_vtable, ("in", "tbl"), store=("vsrc", "versioned")),
}
