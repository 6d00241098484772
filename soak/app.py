"""The soak application: the shapes users run together, in one topology.

``platform-streams run soak.app:topology`` builds it from ``SOAK_*`` environment variables
(the harness sets them), so it runs as ``run --workers N`` and as separate instances::

    input --map_values(parse: poison raises -> dead-letter topic)--+
        +-- group_by_key().count()                      -> counts   "<count>|<pid>"
        +-- windowed 10 s, grace 2 s, emit-final, sum   -> windows  "<sum>|<n>|<pid>"
        +-- map(key -> group, "<key>|<seq>|<pid>").repartition("by-group")
                .join(table groups)                     -> joined   "<key>|<seq>|<pid>|<tv>|<pid>"

Every value written carries the pid of the process that wrote it (a join result both: the
one that wrote it to the repartition topic and the one that joined it): the checker traces a
duplicate update to the process that first wrote it (a killed process's open transaction,
which Tansu commits on the next ``init_transactions``, is the broker's doing).
"""

from __future__ import annotations

import os

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, Repartitioned
from platform_streams.dsl.emit_strategy import EmitStrategy
from platform_streams.dsl.windows import TimeWindows
from platform_streams.serde import String

WINDOW_MS = 10_000
GRACE_MS = 2_000
#: keys are ``k<i>``; the join's table is keyed by ``g<i % GROUPS>``
GROUPS = 16
POISON_PREFIX = "poison-"
COUNTS_STORE = "soak-counts"
WINDOWS_STORE = "soak-windows"
TABLE_STORE = "soak-groups"
REPARTITION = "by-group"
#: sub-topologies: input (count, windows, re-key) and the repartition topic (join)
SUBTOPOLOGIES = 2

S = String()


def amount(seq: int) -> int:
    """The amount the windowed sum adds for record ``seq`` of a key (checker and app agree)."""
    return seq % 7 + 1


def group_of(key: str) -> str:
    """The join key of input key ``k<i>``."""
    return f"g{int(key[1:]) % GROUPS}"


def table_value(group: str) -> str:
    """What the table holds for ``group`` (written once, before the input starts)."""
    return f"tv-{group}"


def parse(value: str) -> str:
    """Poison records fail here: the processing exception handler dead-letters them."""
    if value.startswith(POISON_PREFIX):
        raise ValueError(f"poison record {value!r}")
    int(value)
    return value


def _add(key: str, value: str, aggregate: str) -> str:
    total, n = (int(x) for x in aggregate.split("|"))
    return f"{total + amount(int(value))}|{n + 1}"


def _stamp(value: object) -> str:
    return f"{value}|{os.getpid()}"


def build(input_topic: str, table_topic: str, counts: str, windows: str, joined: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    grouped = Grouped(key_serde=S, value_serde=S)
    source = builder.stream(input_topic, Consumed(key_serde=S, value_serde=S)).map_values(parse)
    (
        source.group_by_key(grouped)
        .count(materialized=Materialized.as_(COUNTS_STORE).with_key_serde(S).with_caching_disabled())
        .to_stream()
        .map_values(_stamp)
        .to(counts, Produced(key_serde=S, value_serde=S))
    )
    (
        source.group_by_key(grouped)
        .windowed_by(TimeWindows.of_size_and_grace(WINDOW_MS, GRACE_MS))
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(
            lambda: "0|0",
            _add,
            materialized=Materialized.as_(WINDOWS_STORE).with_key_serde(S).with_value_serde(S),
        )
        .to_stream()
        .map(lambda wk, v: (f"{wk.key}@{wk.window.start_ms}", _stamp(v)))
        .to(windows, Produced(key_serde=S, value_serde=S))
    )
    table = builder.table(table_topic, Consumed(key_serde=S, value_serde=S), Materialized.as_(TABLE_STORE))
    (
        source.map(lambda k, v: (group_of(k), _stamp(f"{k}|{v}")))
        .repartition(Repartitioned(name=REPARTITION, key_serde=S, value_serde=S))
        .join(table, lambda v, tv: _stamp(f"{v}|{tv}"))
        .to(joined, Produced(key_serde=S, value_serde=S))
    )
    return builder


def topology() -> StreamsBuilder:
    """The CLI's factory: topic names from ``SOAK_INPUT``, ``SOAK_TABLE``, ``SOAK_COUNTS``,
    ``SOAK_WINDOWS`` and ``SOAK_JOINED``."""
    env = os.environ
    return build(
        env["SOAK_INPUT"], env["SOAK_TABLE"], env["SOAK_COUNTS"], env["SOAK_WINDOWS"], env["SOAK_JOINED"]
    )
