"""A tumbling-window aggregation's record, as source text for the fused source.

``TimeWindowAggregateProcessor.process`` for a record of tumbling windows without a
wall-clock close is: advance the processor's stream time, compute the close time, check
whether a pending window is due (emit-final), emit before the write if the store caches,
drop the record if its one window is closed, else fetch-aggregate-put the window through
the store's one-call step (``direct_window_aggregate``) -- three Python calls (``process``,
the step, the cache's ``replace``) for what is, on a window the cache holds, a few dict
operations. :func:`window_fragment` writes that work as statements the fused source runs
in line (:class:`~platform_streams.processor.node.FusedFragment`), the window's entry read,
replaced and accounted for as the step and ``NamedCache.replace`` do. Whatever is not a
cached window of a fixed-width number (a new window, a pending delete, a store with a key
index, an aggregate that is None) goes to the step, or to ``process`` itself (a None or
non-``bytes`` key, metrics on). Measured as a bound before it was written: -17 % CPU a
record of window_sum in process (bench/RESULTS.md).
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from platform_streams.processor.node import FusedFragment, call_text
from platform_streams.serde.primitive import Bytes
from platform_streams.state.wrappers.aggregate_fragment import CACHE_PROLOGUE, PACKED, cache_write

if TYPE_CHECKING:
    from platform_streams.dsl.internals.window_processors import TimeWindowAggregateProcessor

__all__ = ["window_fragment"]

#: ``CachingWindowStore._cache_put``'s stream of window starts, as the step keeps it
_OBSERVED = """\
if s{n} > {caching}._observed:
    {caching}._observed = s{n}
"""

#: TimeWindowAggregateProcessor.process for one tumbling window, its step on a cached window
_TEMPLATE = """\
if g{n} is None or {k} is None or {type}({k}) is not {bytes} or {ts} < 0:
    {process}({k}, {v}, {ts}, h)
else:
    if {ts} > {proc}.observed_stream_time:
        {proc}.observed_stream_time = {ts}
    q{n} = {proc}.observed_stream_time - {grace}
    d{n} = {proc}.pending
    d{n} = d{n} is not None and q{n} >= d{n}.min_due
    if d{n} and {proc}.emit_before_write:
        {proc}._emit_closed(q{n}, h)
    s{n} = {ts} - {ts} % {size}
    if s{n} + {size} <= q{n}:
        {proc}.drop_late({k}, {ts}, s{n}, s{n} + {size}, q{n})
    else:
        {proc}._headers = h
        try:
            b{n} = {k} + {suffix}(s{n}, 0)
            e{n} = g{n}(b{n})
            if e{n} is not None and (e{n}[2] is not None or e{n}[0] is None or {caching}._index is not None):
                e{n} = None
            if e{n} is not None and len(e{n}[0]) == {fixed_size}:
                m{n}(b{n})
                t{n}, a{n} = {unpack}(e{n}[0])
                if {ts} > t{n}:
                    t{n} = {ts}
                a{n} = {aggregate_call}
                if a{n} is None:
                    {layered_put}({k}, None, t{n}, s{n})
                else:
{write}\
            else:
                e{n} = {window_step}({k}, {v}, {ts}, s{n})
                if e{n} is None:
                    {proc}.layered_window({k}, {v}, {ts}, s{n})
                elif e{n}:
                    {track}(s{n} + {size}, s{n}, {k})
        finally:
            {proc}._headers = None
    if d{n} and not {proc}.emit_before_write:
        {proc}._emit_closed(q{n}, h)
"""


def window_fragment(processor: TimeWindowAggregateProcessor) -> FusedFragment | None:
    """The fragment of an initialised processor, or None where ``process`` must run: hopping
    windows, a wall-clock close or emit throttle, no one-call step, or a store the step's in-line form does
    not serve (``aggregate_fragment_parts``)."""
    windows = processor.windows
    step = processor._step
    if (
        processor.wall_clock is not None
        or processor.emit_interval_ms
        or step is None
        or windows.size_ms != windows.advance_ms
    ):
        return None
    parts = processor.store.aggregate_fragment_parts()
    if parts is None:
        return None
    pending = processor.pending
    # a new window's tracking: ``PendingWindows.add`` itself where the key is its own bytes
    # (the fragment runs for bytes keys only; ``Bytes.serialize`` returns them unchanged)
    track = pending.add if pending is not None and type(processor.key_serde) is Bytes else processor.track
    bound = {
        **parts,
        "proc": processor,
        "track": track,
        "window_step": step,
        "aggregator": processor.params.aggregator,
        "size": windows.size_ms,
        "grace": windows.grace_ms,
    }
    write = textwrap.indent(PACKED + _OBSERVED, "    " * 5) + cache_write("b{n}", "None", 5)
    aggregate = call_text(bound["aggregator"], "{aggregator}", key="{k}", value="{v}", aggregate="a{n}")
    template = _TEMPLATE.replace("{write}", write).replace("{aggregate_call}", aggregate)
    return FusedFragment(template, bound, CACHE_PROLOGUE)
