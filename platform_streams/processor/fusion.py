"""Fuse chains of stateless operators into one generated Python function.

A filter -> map_values -> to chain in Kafka Streams is three node hops per record.
Here the source, every stateless operator with a single parent and every plain
sink below it are emitted as straight-line Python (``if pred(k, v):``,
``v1 = mapper(v)``, ``send(...)``) and compiled once per task; user functions are
bound as default arguments so each is a local-variable call. Nodes that cannot be
inlined (stateful processors, merges with several parents, sinks with custom
partitioners) are called through their entry function, or run in line where their
processor offers the source text (a ``FusedFragment``). The source's own record code, and
the batch loop around it, are :mod:`~platform_streams.processor.fused_source`'s.

Debugging generated code: every generated line ends with a comment naming its node,
bound objects carry their node's name (``_f1_KSTREAM_FILTER_0000000001``), and the source
text is registered in :mod:`linecache` under the function's pseudo file name, so a
traceback through fused code shows the generated line (and the node) followed by the
user's own line. The line -> node map of each pseudo file lets :func:`node_of_traceback`
name the DSL node whose lambda raised.

Compiled once per sub-topology: the generated text of a source is the same for every
task of a sub-topology (bound names are numbered in emission order), so it is compiled
once and each task executes the shared code object with its own bound objects (a factory
per task). The code, its line map and its linecache entry are dropped when the last
task's function is garbage (:func:`weakref.finalize`), so tasks created and closed over a
long run leave nothing behind.

Processing errors are handled at the node that raised them, as Kafka Streams'
``ProcessorNode.process`` does (KIP-1033): each node's own work -- an operator's function, a
processor's call -- is emitted inside ``try`` (free in CPython 3.11 unless it raises), whose
``except`` hands the error to the task's :data:`~platform_streams.processor.node.NodeFailure`
callback. When the handler says CONTINUE the node's children are skipped and the code goes
on with the node's siblings (the next child of its parent, the next record a ``flat_map``
yields); everything else is re-raised unchanged, so a node above never handles an error
twice. Children are emitted after the ``try`` (its ``else``) wherever the node's work is one
statement, so that a long chain does not nest blocks (CPython allows 20 statically nested).

Sink failures take an explicit path: each inlined send (and each sink entry function,
graph.py) marks an exception raised while serializing or sending its record with the
sink's name (:func:`mark_sink_failure`) and re-raises it unchanged, so the task hands it
to the production exception handler (:func:`failed_sink`) and the worker still sees the
original type (a fenced producer stays a ``TaskMigratedError``).

``StreamsConfig.fusion = False`` replaces all of this by plain closures
(:mod:`platform_streams.processor.plain_nodes`), one Python function per node, for
stepping through in a debugger.
"""

from __future__ import annotations

import itertools
import linecache
import re
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, TracebackType
from typing import Any

from platform_streams.processor.node import FusedFragment, NodeFailure
from platform_streams.topology.nodes import Node, ProcessorNode, SinkNode

_counter = itertools.count()
#: pseudo file name -> {line number -> node name} (one per compiled source text)
_LINE_MAPS: dict[str, dict[int, str]] = {}
#: the attribute of an exception raised by a sink: the sink's node name
_SINK_ATTR = "_platform_streams_sink"
#: deeper than this (indent levels, statically nested blocks) a stateless child is called
#: through its own compiled entry instead of in line: CPython's parser allows 100 indent
#: levels, its compiler 20 nested blocks, and each fused node adds to one of them
_MAX_INDENT = 60
_MAX_BLOCKS = 14


@dataclass
class _Compiled:
    """One generated source text compiled once, shared by the tasks that use it."""

    code: CodeType
    filename: str
    users: int = 0


#: generated source text -> its compiled code (see the module docstring)
_COMPILED: dict[str, _Compiled] = {}
_COMPILED_LOCK = threading.Lock()


def _identifier(node: str) -> str:
    """A node name as part of a Python identifier (``KSTREAM-FILTER-1`` -> ``KSTREAM_FILTER_1``)."""
    return re.sub(r"\W", "_", node)


#: sources of functions that became garbage, dropped at the next compile (see _release)
_RELEASED: deque[str] = deque()


def _release(source: str) -> None:
    """A function compiled from ``source`` is gone (a :func:`weakref.finalize` callback).

    It only queues the source: finalizers run inside garbage collection, which may start
    while this thread holds ``_COMPILED_LOCK`` in :meth:`Emitter.compile` -- taking the
    lock here would deadlock. The queue is drained under the lock."""
    _RELEASED.append(source)


def _drain_released() -> None:
    """Drop the code of sources no task uses any more (``_COMPILED_LOCK`` held)."""
    while _RELEASED:
        source = _RELEASED.popleft()
        compiled = _COMPILED.get(source)
        if compiled is None:
            continue
        compiled.users -= 1
        if compiled.users <= 0:
            del _COMPILED[source]
            _LINE_MAPS.pop(compiled.filename, None)
            linecache.cache.pop(compiled.filename, None)


def compiled_sources() -> int:
    """How many generated source texts are compiled and in use now (tests check it is bounded)."""
    with _COMPILED_LOCK:
        _drain_released()
        return len(_COMPILED)


def mark_sink_failure(exc: BaseException, sink: str) -> None:
    """Record that ``exc`` was raised serializing or sending the record of node ``sink``
    (the innermost sink wins when sinks nest through a processor's forward)."""
    exc.__dict__.setdefault(_SINK_ATTR, sink)


def failed_sink(exc: BaseException) -> str | None:
    """The sink whose record ``exc`` failed to serialize or send, None if no sink raised it."""
    sink = exc.__dict__.get(_SINK_ATTR)
    return sink if isinstance(sink, str) else None


class PassBytes:
    """A sink serializer that returns ``bytes`` unchanged (the ``Bytes`` serde's).

    Fused code tests the type inline and calls ``serialize`` only for other types (which
    it converts or rejects), sparing a call per record for the common ``bytes`` key.
    """

    __slots__ = ("serialize",)

    def __init__(self, serialize: Callable[[Any], Any]) -> None:
        self.serialize = serialize


class FastSerializer:
    """A sink serializer with a C-level twin (:meth:`Serde.fast_serializer`).

    Fused code calls ``fast`` for a non-None object (no Python call of ours per record) and,
    if it raises, ``serialize`` on the same object, which reports the serde's own error.
    """

    __slots__ = ("fast", "serialize")

    def __init__(self, fast: Callable[[Any], bytes], serialize: Callable[[Any], Any]) -> None:
        self.fast = fast
        self.serialize = serialize


class Emitter:
    """Accumulates generated lines, bound objects and the line -> node map."""

    def __init__(
        self,
        nodes: Mapping[str, Node],
        entry_of: Callable[[str], Callable[..., None]],
        sink_parts: Callable[[SinkNode], tuple[Any, ...] | None],
        step_of: Callable[[str], Callable[[Any, Any, int], bool] | None] | None = None,
        fragment_of: Callable[[str], FusedFragment | None] | None = None,
        node_failure: NodeFailure | None = None,
    ) -> None:
        self.nodes = nodes
        #: what calls node ``name`` (for a processor: its bare ``process``, guarded here)
        self.entry_of = entry_of
        self.sink_parts = sink_parts
        self.step_of = step_of
        self.fragment_of = fragment_of
        #: the task's handling of a node's own error (None: nodes are not guarded)
        self.node_failure = node_failure
        self._failure_name: str | None = None
        #: statically nested blocks the code being emitted is inside of (see _MAX_BLOCKS)
        self.blocks = 0
        #: ``(indent, text, node)``: rendered (with the line -> node map) by :meth:`compile`
        self.lines: list[tuple[int, str, str]] = []
        self.bound: dict[str, Any] = {}
        #: where fragments' prologues go when the code is a batch loop (run once a batch);
        #: None: in line, before their fragment
        self.prologue: list[tuple[int, str, str]] | None = None
        #: value variable -> (getter, variable): a ``map_values`` whose function is that getter
        #: reads the variable instead (:func:`compile_pair_entry`: a value built from parts)
        self.parts: dict[str, tuple[Callable[[Any], Any], str]] = {}
        self._vars = itertools.count(1)

    def fresh(self, prefix: str) -> str:
        """A local variable name no other line of this function uses."""
        return f"{prefix}{next(self._vars)}"

    def bind(self, obj: Any, prefix: str, node: str | None = None) -> str:
        """A parameter name for ``obj``; with ``node``, the name carries the node's name."""
        name = f"_{prefix}{len(self.bound)}" + (f"_{_identifier(node)}" if node is not None else "")
        self.bound[name] = obj
        return name

    def line(self, indent: int, text: str, node: str) -> None:
        self.lines.append((indent, text, node))

    def rows(self, node: str, rows: list[tuple[int, str]]) -> None:
        """Emit ``(indent, text)`` rows, all of node ``node``."""
        for indent, text in rows:
            self.line(indent, text, node)

    def block(self, indent: int, node: str, body: Callable[[], None]) -> None:
        """Emit ``body`` at ``indent``; a ``pass`` keeps an empty block valid."""
        before = len(self.lines)
        body()
        if len(self.lines) == before:
            self.line(indent, "pass", node)

    def children(self, node: Node, k: str, v: str, indent: int) -> None:
        for child in node.children:
            self.child(child, k, v, indent)

    def guard(
        self, indent: int, node: str, body: Callable[[int], None], then: Callable[[int], None] | None = None
    ) -> None:
        """Emit ``body`` (node ``node``'s own work) so that what it raises is the node's error
        (see the module docstring), then ``then`` (its children), which runs only when
        ``body`` succeeded. Each is called with the indent to emit at."""
        if self.node_failure is None:
            body(indent)
            if then is not None:
                then(indent)
            return
        if self._failure_name is None:
            self._failure_name = self.bind(self.node_failure, "nodefail")
        self.line(indent, "try:", node)
        start = len(self.lines)
        self.blocks += 1
        self.block(indent + 1, node, lambda: body(indent + 1))
        self.blocks -= 1
        if len(self.lines) == start + 1 and not self.lines[start][1].endswith(":"):
            # one simple statement: on the try's line, which spares the NOP CPython emits
            # for a line of its own (the only cost of a try that does not raise)
            self.lines[start - 1 : start + 1] = [(indent, f"try: {self.lines[start][1]}", node)]
        self.line(indent, "except Exception as nx:", node)
        self.line(indent + 1, f"if {self._failure_name}(nx, {node!r}):", node)
        self.line(indent + 2, "raise", node)
        if then is not None:
            self.line(indent, "else:", node)
            before = len(self.lines)
            then(indent + 1)
            if len(self.lines) == before:  # no children: no else
                self.lines.pop()

    def child(self, name: str, k: str, v: str, indent: int) -> None:
        node = self.nodes[name]
        if (
            isinstance(node, ProcessorNode)
            and node.op is not None
            and len(node.parents) == 1
            and indent < _MAX_INDENT
            and self.blocks < _MAX_BLOCKS
        ):
            self.op(node, k, v, indent)
            return
        if isinstance(node, SinkNode):
            parts = self.sink_parts(node)
            if parts is not None:
                send_fn, topic_name, key_ser, value_ser, direct = parts
                send, topic = self.bind(send_fn, "send"), self.bind(topic_name, "t", name)
                mark = self.bind(mark_sink_failure, "sinkfail")
                # zero-cost unless it raises (CPython 3.11): the explicit sink-failure path
                self.line(indent, "try:", name)
                key_expr = self.serialized(key_ser, k, "ks", indent + 1, name)
                value_expr = self.serialized(value_ser, v, "vs", indent + 1, name)
                if direct is None:
                    self.line(indent + 1, f"{send}({topic}, {key_expr}, {value_expr}, ts, h, None)", name)
                else:
                    self.produce(direct, topic, key_expr, value_expr, indent + 1, name)
                self.line(indent, "except Exception as sx:", name)
                self.line(indent + 1, f"{mark}(sx, {name!r})", name)
                self.line(indent + 1, "raise", name)
                return
        entry = self.bind(self.entry_of(name), "e", name)
        step = self.step_of(name) if self.step_of is not None else None
        fragment = self.fragment_of(name) if self.fragment_of is not None else None

        def call(i: int) -> None:
            if fragment is not None:  # NodeProcessor.fused_fragment: its work in line
                bound_step = self.bind(step, "step", name) if step is not None else "None"
                self.fragment(fragment, name, k, v, i, bound_step, entry)
            elif step is not None:  # NodeProcessor.fused_step: process only what it leaves
                bound_step = self.bind(step, "step", name)
                self.line(i, f"if {k} is None or {v} is None or not {bound_step}({k}, {v}, ts):", name)
                self.line(i + 1, f"{entry}({k}, {v}, ts, h)", name)
            else:
                self.line(i, f"{entry}({k}, {v}, ts, h)", name)

        if isinstance(node, ProcessorNode):  # a sink's failure is no node's: it passes anyway
            self.guard(indent, name, call)
        else:
            call(indent)

    def produce(self, producer: Any, topic: str, key: str, value: str, indent: int, node: str) -> None:
        """A sink's send as the producer's own: librdkafka's ``produce`` called here, the
        record counted in ``sent_by_topic`` (``StreamsProducer.sends_directly``). A record
        ``produce`` refuses was not queued: the producer's ``send_refused`` then does what
        its send does after such a refusal (counts it, waits for room, or hands it to the
        production handler). ``produce`` is read from the producer once a batch (a rebuilt
        producer has a new one, never in the middle of a batch)."""
        owner, counts = self.bind(producer, "producer", node), self.bind(producer.sent_by_topic, "sent", node)
        refused = self.bind(producer.send_refused, "refused", node)
        n = next(self._vars)
        read = (f"pr{n} = {owner}._produce", node)
        if self.prologue is None:
            self.line(indent, *read)
        else:
            self.prologue.append((1, *read))
        self.line(indent, f"kb{n} = {key}", node)  # serialized once, also for the send
        self.line(indent, f"vb{n} = {value}", node)
        self.line(indent, "try:", node)
        # positional: (topic, value, key, partition -- -1 is librdkafka's "any" --, callback,
        # on_delivery -- None: the producer's own --, timestamp, headers); keyword arguments
        # cost ~0.45 us more a call (bench/RESULTS.md)
        self.line(indent + 1, f"pr{n}({topic}, vb{n}, kb{n}, -1, None, None, ts, h or None)", node)
        self.line(indent, f"except Exception as px{n}:", node)
        self.line(indent + 1, f"{refused}(px{n}, {topic}, kb{n}, vb{n}, ts, h, None)", node)
        self.line(indent, "else:", node)
        self.line(indent + 1, "try:", node)
        self.line(indent + 2, f"{counts}[{topic}] += 1", node)
        self.line(indent + 1, "except KeyError:", node)
        self.line(indent + 2, f"{counts}[{topic}] = 1", node)

    def fragment(
        self, fragment: FusedFragment, node: str, k: str, v: str, indent: int, step: str, process: str
    ) -> None:
        """Emit ``fragment`` (a processor's step in line) for the record ``k``, ``v``."""
        fields = {name: self.bind(obj, name, node) for name, obj in fragment.bound.items()}
        fields |= {"k": k, "v": v, "ts": "ts", "n": f"_{next(self._vars)}", "step": step, "process": process}
        prologue = self.prologue
        if prologue is None:
            self._lines(fragment.prologue.format(**fields), indent, node, self.lines)
        else:
            self._lines(fragment.prologue.format(**fields), 1, node, prologue)
        self._lines(fragment.template.format(**fields), indent, node, self.lines)

    @staticmethod
    def _lines(text: str, indent: int, node: str, out: list[tuple[int, str, str]]) -> None:
        for line in text.splitlines():
            stripped = line.lstrip(" ")
            out.append((indent + (len(line) - len(stripped)) // 4, stripped, node))

    def serialized(self, serializer: Any, var: str, prefix: str, indent: int, node: str) -> str:
        """The expression serializing ``var`` (a :class:`PassBytes` is inlined as a type test;
        a :class:`FastSerializer` is statements at ``indent`` that leave the bytes in a new
        variable, the expression then)."""
        if serializer is None:
            return var
        if isinstance(serializer, FastSerializer):
            fast, slow = self.bind(serializer.fast, prefix + "f"), self.bind(serializer.serialize, prefix)
            out = f"s{next(self._vars)}"
            self.line(indent, "try:", node)
            self.line(indent + 1, f"{out} = None if {var} is None else {fast}({var})", node)
            self.line(indent, "except Exception:", node)
            self.line(indent + 1, f"{out} = {slow}({var})", node)
            return out
        if isinstance(serializer, PassBytes):
            fn, is_bytes = self.bind(serializer.serialize, prefix), self.bind(bytes, "bytes")
            return f"({var} if {var}.__class__ is {is_bytes} else {fn}({var}))"
        return f"{self.bind(serializer, prefix)}({var})"

    def op(self, node: ProcessorNode, k: str, v: str, indent: int) -> None:
        assert node.op is not None
        kind, name = node.op.kind, node.name
        part = self.parts.get(v)
        if kind == "map_values" and part is not None and node.op.fns[0] is part[0]:
            self.children(node, k, part[1], indent)  # the getter's result is a variable already
            return
        fns = [self.bind(fn, "f", name) for fn in node.op.fns]
        n = next(self._vars)
        k2, v2 = f"k{n}", f"v{n}"

        def statement(text: str) -> Callable[[int], None]:
            return lambda i: self.line(i, text, name)

        def then(kk: str, vv: str) -> Callable[[int], None]:
            return lambda i: self.children(node, kk, vv, i)

        def loop(header: str, kk: str, vv: str) -> Callable[[int], None]:
            # the children run inside the loop, so inside the guard: they guard themselves,
            # and what they let pass the guard lets pass too
            def emit(i: int) -> None:
                self.line(i, header, name)
                self.blocks += 1
                self.block(i + 1, name, lambda: self.children(node, kk, vv, i + 1))
                self.blocks -= 1

            return emit

        if kind in ("filter", "filter_not"):
            neg = "not " if kind == "filter_not" else ""
            kept = f"c{n}"

            def test(i: int) -> None:
                self.line(i, f"if {neg}{kept}:", name)
                self.block(i + 1, name, lambda: self.children(node, k, v, i + 1))

            self.guard(indent, name, statement(f"{kept} = {fns[0]}({k}, {v})"), test)
        elif kind == "map":
            self.guard(indent, name, statement(f"{k2}, {v2} = {fns[0]}({k}, {v})"), then(k2, v2))
        elif kind == "map_values":
            self.guard(indent, name, statement(f"{v2} = {fns[0]}({v})"), then(k, v2))
        elif kind == "map_values_with_key":
            self.guard(indent, name, statement(f"{v2} = {fns[0]}({k}, {v})"), then(k, v2))
        elif kind == "select_key":
            self.guard(indent, name, statement(f"{k2} = {fns[0]}({k}, {v})"), then(k2, v))
        elif kind == "flat_map":
            self.guard(indent, name, loop(f"for {k2}, {v2} in {fns[0]}({k}, {v}):", k2, v2))
        elif kind in ("flat_map_values", "flat_map_values_with_key"):
            args = f"{k}, {v}" if kind.endswith("with_key") else v
            self.guard(indent, name, loop(f"for {v2} in {fns[0]}({args}):", k, v2))
        elif kind in ("peek", "foreach"):
            self.guard(indent, name, statement(f"{fns[0]}({k}, {v})"), then(k, v))
        elif kind == "passthrough":
            self.children(node, k, v, indent)
        elif kind == "branch":
            # the predicates are the node's work, the chosen child runs inside the guard
            self.guard(indent, name, lambda i: self._branch(node, fns, k, v, i))
        else:  # pragma: no cover - OpKind is a closed set
            raise ValueError(f"unknown stateless op {kind!r}")

    def _branch(self, node: ProcessorNode, preds: list[str], k: str, v: str, indent: int) -> None:
        assert node.op is not None
        children = list(node.children)
        for i, pred in enumerate(preds):
            keyword = "if" if i == 0 else "elif"
            self.line(indent, f"{keyword} {pred}({k}, {v}):", node.name)
            self._child_block(children[i], k, v, indent + 1, node.name)
        if node.op.has_default and len(children) > len(preds):
            default = children[len(preds)]
            if preds:
                self.line(indent, "else:", node.name)
                self._child_block(default, k, v, indent + 1, node.name)
            else:
                self.child(default, k, v, indent)

    def _child_block(self, child: str, k: str, v: str, indent: int, node_name: str) -> None:
        def body() -> None:
            self.child(child, k, v, indent)

        self.block(indent, node_name, body)

    def compile(self, header: str, label: str) -> Callable[..., Any]:
        """The function for this task: the shared code of this source text (compiled on
        first use, see the module docstring) executed with this task's bound objects."""
        defaults = "".join(f", {name}={name}" for name in self.bound)
        params = header.replace(")", f"{defaults})", 1)
        lines = self.lines or [(1, "pass", label)]
        body = "\n".join(f"{'    ' * indent}{text}  # {node}" for indent, text, node in lines)
        # +2: line numbers count from 1, and the generated 'def' line comes first
        line_nodes = {number + 2: node for number, (_, _, node) in enumerate(lines)}
        source = f"def {params}:\n{body}\n"
        with _COMPILED_LOCK:
            _drain_released()
            compiled = _COMPILED.get(source)
            if compiled is None:
                filename = f"<fused {label} #{next(_counter)}>"
                compiled = _COMPILED[source] = _Compiled(compile(source, filename, "exec"), filename)
                _LINE_MAPS[filename] = line_nodes
            # (re-)registered on every use: linecache.clearcache() may have dropped it
            linecache.cache[compiled.filename] = (
                len(source),
                None,
                source.splitlines(True),
                compiled.filename,
            )
            compiled.users += 1
        namespace: dict[str, Any] = dict(self.bound)
        exec(compiled.code, namespace)
        # popped: the function must not keep itself alive through its globals
        fn: Callable[..., None] = namespace.pop(header.split("(", 1)[0])
        fn.__ps_source__ = source  # type: ignore[attr-defined]
        weakref.finalize(fn, _release, source)
        return fn


def compile_entry(
    node: ProcessorNode,
    nodes: Mapping[str, Node],
    entry_of: Callable[[str], Callable[..., None]],
    sink_parts: Callable[[SinkNode], tuple[Any, ...] | None],
    node_failure: NodeFailure | None = None,
) -> Callable[..., None]:
    """A ``(key, value, timestamp, headers)`` function running ``node`` and its fusable descendants,
    each guarded by ``node_failure`` (see :meth:`Emitter.guard`)."""
    em = Emitter(nodes, entry_of, sink_parts, node_failure=node_failure)
    em.op(node, "k", "v", 1)
    return em.compile("_entry(k, v, ts, h)", node.name)


#: ``(key, new, old, timestamp)``: see :func:`compile_pair_entry`
PairForward = Callable[[Any, Any, Any, int], None]


def compile_pair_entry(
    node: ProcessorNode,
    nodes: Mapping[str, Node],
    entry_of: Callable[[str], Callable[..., None]],
    sink_parts: Callable[[SinkNode], tuple[Any, ...] | None],
    value_type: type[tuple[Any, Any]],
    first: Callable[[Any], Any],
    node_failure: NodeFailure | None = None,
) -> PairForward:
    """A ``(key, new, old, timestamp)`` function that runs ``node``'s children on the value
    ``value_type((new, old))`` with no headers: what a table processor's flush listener
    forwards (a ``Change``), without the listener's call, the value's construction where no
    child needs it (a ``map_values(first)`` child -- ``KTable.to_stream`` -- reads ``new``
    directly), or the call into the child's own fused entry."""
    em = Emitter(nodes, entry_of, sink_parts, node_failure=node_failure)
    em.parts["v"] = (first, "new")
    em.children(node, "k", "v", 1)
    body = em.lines
    em.lines = [(1, "h = None", node.name)]
    if any(_VALUE_NAME.search(text) for _, text, _ in body):  # a child still takes the value
        build, value = em.bind(tuple.__new__, "tnew"), em.bind(value_type, "vt")
        em.lines.append((1, f"v = {build}({value}, (new, old))", node.name))
    em.lines += body
    return em.compile("_pair(k, new, old, ts)", node.name)


#: the name ``v`` as a whole word in a generated line (other names are ``v3``, ``_vs4``, ...)
_VALUE_NAME = re.compile(r"(?<![\w.])v(?!\w)")


def node_of_traceback(tb: TracebackType | None) -> str | None:
    """The DSL node whose code raised, if the traceback passes through fused code (its line
    map) or a plain node closure (its ``node_name`` local, see plain_nodes.py)."""
    found = None
    while tb is not None:
        frame = tb.tb_frame
        line_map = _LINE_MAPS.get(frame.f_code.co_filename)
        if line_map is not None:
            found = line_map.get(tb.tb_lineno, found)
        elif frame.f_code.co_filename == _PLAIN_NODES_FILE:
            node = frame.f_locals.get("node_name")
            found = node if isinstance(node, str) else found
        tb = tb.tb_next
    return found


_PLAIN_NODES_FILE = str(Path(__file__).with_name("plain_nodes.py"))
