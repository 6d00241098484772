"""A source's fused code: one record's function, and the batch loop around it.

:func:`compile_source` makes a task's ``(raw_record)`` function: deserialize, take the
timestamp, advance stream time, then run the fused children (:mod:`.fusion`'s
:class:`~platform_streams.processor.fusion.Emitter`). :func:`compile_batch` makes, from the
same record code, a ``(queue, n)`` function that takes ``n`` records off a task's queue and
does for each what ``StreamTask.process`` does around the source (the current record, the
exception handlers for what leaves the record's nodes unhandled, stream-time punctuation,
then the consumed offset and the count, once at the end): one Python call a batch instead
of one a record, and the values
fragments compute once a batch (``FusedFragment.prologue``) are computed once. A task with
one input partition (no choice of the next record to make) processes its records this way.

The record code has no ``return``: a record the deserialization handler or the invalid
timestamp skips goes on to the next record through ``else`` branches, so the two functions
share one text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from platform_streams.processor.fusion import Emitter
from platform_streams.processor.node import FusedFragment, NodeFailure
from platform_streams.processor.partitioner import SEED, PlacementCheck, murmur2_with_seed
from platform_streams.processor.source_hooks import BatchHooks, SourceHooks
from platform_streams.topology.nodes import Node, SinkNode, SourceNode

__all__ = ["compile_batch", "compile_source"]

#: ``(queue, n) -> records processed``
Batch = Callable[[Any, int], int]


def _record(em: Emitter, source: SourceNode, hooks: SourceHooks, indent: int) -> str:
    """Emit one record's code at ``indent``, the record in ``msg`` (see the module docstring);
    returns the name the task context is bound to.

    ``hooks`` (:class:`SourceHooks`) carries the task whose ``stream_time`` is advanced, the
    deserializers and the callbacks. ``value_fast_deserializer`` replaces the value
    deserializer for non-None values; when it raises, the deserializer runs on the same
    bytes to raise the serde's own error. ``on_record_lateness`` (DEBUG metrics only, so
    INFO code has no trace of it) receives stream time minus the record's timestamp, 0 for
    a record that advances stream time, as Kafka Streams' record-lateness sensor.
    ``placement_check`` checks the raw key is in the partition murmur2 gives it: one set
    lookup per record, the hash only for keys not seen in place yet.
    """
    name = source.name
    key_deserializer, value_deserializer = hooks.key_deserializer, hooks.value_deserializer
    value_fast_deserializer, placement_check = hooks.value_fast_deserializer, hooks.placement_check
    ctx, err, bad_ts = (
        em.bind(hooks.task, "ctx"),
        em.bind(hooks.on_deserialization_error, "err"),
        em.bind(hooks.on_invalid_timestamp, "badts"),
    )
    i = indent
    raw_key = "msg.key()"
    if placement_check is not None:
        _check_placement(em, placement_check, i, name)
        raw_key = "kb"
    key_expr = f"{em.bind(key_deserializer, 'kd')}({raw_key})" if key_deserializer else raw_key
    em.line(i, "try:", name)
    em.line(i + 1, f"k = {key_expr}", name)
    if value_fast_deserializer is not None and value_deserializer is not None:
        vd, vf = em.bind(value_deserializer, "vd"), em.bind(value_fast_deserializer, "vf")
        em.line(i + 1, "v = msg.value()", name)
        em.line(i + 1, "if v is not None:", name)
        em.line(i + 2, "try:", name)
        em.line(i + 3, f"v = {vf}(v)", name)
        em.line(i + 2, "except Exception:", name)
        em.line(i + 3, f"v = {vd}(v)", name)
    else:
        value = f"{em.bind(value_deserializer, 'vd')}(msg.value())" if value_deserializer else "msg.value()"
        em.line(i + 1, f"v = {value}", name)
    em.rows(name, [(i, "except Exception as exc:"), (i + 1, f"{err}(msg, exc)"), (i, "else:")])
    em.line(i + 1, "ts = msg.timestamp()[1]", name)
    if source.timestamp_extractor is not None:
        tsx = em.bind(source.timestamp_extractor, "tsx")
        em.line(i + 1, f"ts = {tsx}(k, v, ts, {ctx}.stream_time)", name)
    em.rows(
        name,
        [
            (i + 1, "if ts < 0:"),
            (i + 2, f"{bad_ts}(msg, ts)"),
            (i + 1, "else:"),
            (i + 2, f"if ts > {ctx}.stream_time:"),
            (i + 3, f"{ctx}.stream_time = ts"),
        ],
    )
    if hooks.on_record_lateness is not None:
        late = em.bind(hooks.on_record_lateness, "late")
        em.rows(name, [(i + 3, f"{late}(0)"), (i + 2, "else:"), (i + 3, f"{late}({ctx}.stream_time - ts)")])
    em.line(i + 2, f"{ctx}.record_time = ts", name)
    em.line(i + 2, "h = msg.headers()", name)
    em.children(source, "k", "v", i + 2)
    return ctx


def _check_placement(em: Emitter, placement: PlacementCheck, i: int, name: str) -> None:
    """The key-placement check of ``kb`` (the raw key). Per record: a set lookup, and
    :meth:`PlacementCheck.check` for a key not in the set. In a batch (``em.prologue``) the
    hash runs in line, placed keys join the set while the check's ``remember`` (read once a
    batch) holds, and ``after_batch`` (in the batch's epilogue) decides about the next."""
    good = em.bind(placement.good, "good")
    em.line(i, "kb = msg.key()", name)
    em.line(i, f"if kb not in {good}:", name)
    if em.prologue is None:
        em.line(i + 1, f"{em.bind(placement.check, 'place')}(kb)", name)
        return
    owner, hash_ = em.bind(placement, "placement"), em.bind(murmur2_with_seed, "murmur2")
    remember, partitions = em.fresh("remember"), placement.partitions
    em.prologue.append((1, f"{remember} = {owner}.remember", name))
    em.rows(
        name,
        [
            (i + 1, f"if ({hash_}(kb, {SEED}) & 0x7FFFFFFF) % {partitions} != {placement.partition}:"),
            (i + 2, f"{em.bind(placement.misplaced, 'misplaced')}(kb)"),
            (i + 1, f"elif {remember}:"),
            (i + 2, f"{good}.add(kb)"),
        ],
    )


def compile_source(
    source: SourceNode,
    nodes: Mapping[str, Node],
    entry_of: Callable[[str], Callable[..., None]],
    sink_parts: Callable[[SinkNode], tuple[Any, ...] | None],
    hooks: SourceHooks,
    step_of: Callable[[str], Callable[[Any, Any, int], bool] | None] | None = None,
    fragment_of: Callable[[str], FusedFragment | None] | None = None,
    node_failure: NodeFailure | None = None,
) -> Callable[[Any], None]:
    """A ``(raw_record)`` function: deserialize, take the timestamp, advance stream time, run
    children (see :func:`_record`). ``step_of(node)``: the initialised processor's
    ``fused_step``, if any (None before the processors' ``init``); ``fragment_of(node)`` its
    ``fused_fragment``, run in line instead of the step's call; ``node_failure``: what each
    node's guard calls (:meth:`~platform_streams.processor.fusion.Emitter.guard`)."""
    em = Emitter(nodes, entry_of, sink_parts, step_of, fragment_of, node_failure)
    _record(em, source, hooks, 1)
    return em.compile("_source(msg)", source.name)


def compile_batch(
    source: SourceNode,
    nodes: Mapping[str, Node],
    entry_of: Callable[[str], Callable[..., None]],
    sink_parts: Callable[[SinkNode], tuple[Any, ...] | None],
    hooks: SourceHooks,
    batch_hooks: BatchHooks,
    step_of: Callable[[str], Callable[[Any, Any, int], bool] | None] | None = None,
    fragment_of: Callable[[str], FusedFragment | None] | None = None,
    node_failure: NodeFailure | None = None,
) -> Batch:
    """A ``(queue, n) -> processed`` function: :func:`compile_source`'s record code for each of
    the next ``n`` records of ``queue`` (a deque), with ``StreamTask.process``'s work around
    it (``batch_hooks``). ``n`` must not exceed the queue's length."""
    em = Emitter(nodes, entry_of, sink_parts, step_of, fragment_of, node_failure)
    em.blocks = 3  # the batch's try, its loop and the record's try
    em.prologue = []
    name = source.name
    fail = em.bind(batch_hooks.on_failure, "fail")
    punctuate = em.bind(batch_hooks.on_stream_punctuation, "punct")
    progress = em.bind(batch_hooks.on_progress, "progress")
    ctx = _record(em, source, hooks, 4)
    placement = hooks.placement_check
    after = () if placement is None else [(2, f"{em.bind(placement.after_batch, 'placed')}(done)")]
    body, em.lines = em.lines, [(1, "popleft = queue.popleft", name)]
    em.lines += em.prologue
    em.rows(
        name,
        [
            (1, "done = 0"),
            (1, "last = None"),
            (1, "try:"),
            (2, "while done < n:"),
            (3, "msg = popleft()"),
            (3, f"{ctx}.current = msg"),
            (3, "try:"),
        ],
    )
    em.lines += body
    em.rows(
        name,
        [
            (3, "except Exception as exc:"),
            (4, f"{fail}(msg, exc)"),
            (3, "last = msg"),
            (3, "done += 1"),
            (3, f"if {ctx}.has_stream_punctuation:"),
            (4, f"{punctuate}(msg)"),
            (1, "finally:"),
            (2, f"{progress}(last, done)"),
            *after,
            (1, "return done"),
        ],
    )
    batch: Batch = em.compile("_batch(queue, n)", name)
    return batch
