"""Stateless nodes and sources as plain closures: ``StreamsConfig(fusion=False)``.

Why: fused code (processor/fusion.py) is fast but generated; a debugger steps through it
only as text from :mod:`linecache`. With fusion off every node is an ordinary Python
function of this module, whose ``node_name`` local names the DSL node (debuggers show it,
and :func:`~platform_streams.processor.fusion.node_of_traceback` reads it). Semantics are
the fused code's: the same deserialization, timestamp, stream-time and placement steps,
the same operators, and each node's errors handled at the node (:func:`guard_entry`; the
fused tests run both ways).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from platform_streams.processor.node import Forward, NodeFailure
from platform_streams.processor.source_hooks import SourceHooks
from platform_streams.topology.nodes import ProcessorNode, SourceNode

__all__ = ["guard_entry", "plain_entry", "plain_source"]


def guard_entry(entry: Forward, name: str, node_failure: NodeFailure) -> Forward:
    """``entry`` (node ``name``'s function) with its errors handled as the node's: Kafka
    Streams' ``ProcessorNode.process``, what fused code writes in line (``Emitter.guard``).
    The children ``entry`` forwards to are guarded themselves, so what reaches this guard
    from them is what no node handles, which ``node_failure`` lets pass."""

    def guarded(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
        try:
            entry(k, v, ts, h)
        except Exception as exc:
            if node_failure(exc, node_name):
                raise

    return guarded


def _fan_out(children: Sequence[Forward]) -> Forward:
    if len(children) == 1:
        return children[0]

    def forward(k: Any, v: Any, ts: int, h: Any) -> None:
        for child in children:
            child(k, v, ts, h)

    return forward


def plain_entry(node: ProcessorNode, entry_of: Callable[[str], Forward]) -> Forward:
    """The ``(key, value, timestamp, headers)`` function of stateless ``node``."""
    assert node.op is not None
    kind, fns, name = node.op.kind, node.op.fns, node.name
    children = [entry_of(child) for child in node.children]
    if kind == "branch":
        return _branch(node, children)
    forward = _fan_out(children)
    if kind == "passthrough":
        return forward
    fn = fns[0]

    if kind in ("filter", "filter_not"):
        keep = kind == "filter"

        def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
            if bool(fn(k, v)) is keep:
                forward(k, v, ts, h)

    elif kind == "map":

        def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
            k2, v2 = fn(k, v)
            forward(k2, v2, ts, h)

    elif kind in ("map_values", "map_values_with_key", "select_key"):
        with_key = kind != "map_values"

        def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
            out = fn(k, v) if with_key else fn(v)
            if kind == "select_key":
                forward(out, v, ts, h)
            else:
                forward(k, out, ts, h)

    elif kind == "flat_map":

        def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
            for k2, v2 in fn(k, v):
                forward(k2, v2, ts, h)

    elif kind in ("flat_map_values", "flat_map_values_with_key"):
        with_key = kind.endswith("with_key")

        def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
            for v2 in fn(k, v) if with_key else fn(v):
                forward(k, v2, ts, h)

    elif kind in ("peek", "foreach"):

        def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
            fn(k, v)
            forward(k, v, ts, h)

    else:  # pragma: no cover - OpKind is a closed set
        raise ValueError(f"unknown stateless op {kind!r}")
    return run


def _branch(node: ProcessorNode, children: list[Forward]) -> Forward:
    """``split()``: the first predicate that holds picks the branch, else the default."""
    assert node.op is not None
    predicates = node.op.fns
    default = children[len(predicates)] if node.op.has_default and len(children) > len(predicates) else None
    name = node.name

    def run(k: Any, v: Any, ts: int, h: Any, node_name: str = name) -> None:
        for predicate, child in zip(predicates, children, strict=False):
            if predicate(k, v):
                child(k, v, ts, h)
                return
        if default is not None:
            default(k, v, ts, h)

    return run


def plain_source(
    source: SourceNode,
    entry_of: Callable[[str], Forward],
    hooks: SourceHooks,
) -> Callable[[Any], None]:
    """A ``(raw_record)`` function doing what the fused source does (see fused_source.compile_source)."""
    forward = _fan_out([entry_of(child) for child in source.children])
    (
        task,
        key_deserializer,
        value_deserializer,
        on_deserialization_error,
        on_invalid_timestamp,
        on_record_lateness,
        placement_check,
        _,  # the fast value deserializer is a fused-code optimisation
    ) = hooks
    extractor = source.timestamp_extractor
    name = source.name

    def run(msg: Any, node_name: str = name) -> None:
        raw_key = msg.key()
        if placement_check is not None and raw_key not in placement_check.good:
            placement_check.check(raw_key)
        try:
            k = key_deserializer(raw_key) if key_deserializer is not None else raw_key
            v = value_deserializer(msg.value()) if value_deserializer is not None else msg.value()
        except Exception as exc:
            on_deserialization_error(msg, exc)
            return
        ts = msg.timestamp()[1]
        if extractor is not None:
            ts = extractor(k, v, ts, task.stream_time)
        if ts < 0:
            on_invalid_timestamp(msg, ts)
            return
        if ts > task.stream_time:
            task.stream_time = ts
            if on_record_lateness is not None:
                on_record_lateness(0)
        elif on_record_lateness is not None:
            on_record_lateness(task.stream_time - ts)
        task.record_time = ts  # the time a key-value store's change is logged with, as fused code sets it
        forward(k, v, ts, msg.headers())

    return run
