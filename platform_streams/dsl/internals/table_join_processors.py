"""Run-time side of the non-windowed joins (KStream-KTable/GlobalKTable, KTable-KTable).

Kafka Streams' ``KStreamKTableJoinProcessor``, ``KTableKTable{Inner,Left,Right,Outer}Join``
and ``KTableKTableJoinMerger``; the semantics are described in :mod:`platform_streams.dsl.joins`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.change import Change
from platform_streams.dsl.internals.table_processors import (
    StoreValueGetterSupplier,
    TableOp,
    TableProcessor,
    ValueGetterSupplier,
)
from platform_streams.errors import TopologyError
from platform_streams.processor.context import NodeContext
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.state.timestamped import ValueAndTimestamp

if TYPE_CHECKING:
    from platform_streams.dsl.internals.table_processors import VersionedGetter
    from platform_streams.state.timestamped_kv_store import ValueGetter

__all__ = [
    "JoinMergeOp",
    "JoinSide",
    "StreamTableJoinProcessor",
    "TableJoinProcessor",
    "joiner_with_key",
]

log = logging.getLogger(__name__)

Joiner = Callable[[Any, Any, Any], Any]


def joiner_with_key(joiner: Callable[..., Any]) -> Joiner:
    """``joiner`` as ``(key, left, right) -> result`` whether or not it takes the key."""
    if not callable(joiner):
        raise TopologyError(f"a joiner must be callable, got {joiner!r}")
    try:
        params = inspect.signature(joiner).parameters.values()
    except (TypeError, ValueError):
        params = None  # builtins: assume (left, right)
    if params is not None:
        positional = [
            p
            for p in params
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        if len(positional) >= 3:
            return joiner
    return lambda key, left, right: joiner(left, right)


# ---------------------------------------------------------------------------- stream-table


class StreamTableJoinProcessor(NodeProcessor):
    """Kafka Streams' ``KStreamKTableJoinProcessor`` (also the GlobalKTable join)."""

    def __init__(
        self,
        view: ValueGetterSupplier,
        joiner: Joiner,
        left: bool,
        key_selector: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.view = view
        self.joiner = joiner
        self.left = left
        self.key_selector = key_selector

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self._get: ValueGetter = self.view.getter(context)
        #: a versioned table is looked up as of the stream record's time (KIP-914)
        self._get_as_of: VersionedGetter | None = (
            self.view.versioned_getter(context) if self.view.is_versioned() else None
        )

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if value is None:
            self._drop(key)
            return
        lookup = key if self.key_selector is None else self.key_selector(key, value)
        if lookup is None:
            if self.left:
                self.forward(key, self.joiner(key, value, None), timestamp, headers)
            else:
                self._drop(key)
            return
        get_as_of = self._get_as_of
        found = self._get(lookup) if get_as_of is None else get_as_of(lookup, timestamp)
        if found is not None:
            self.forward(key, self.joiner(key, value, found.value), timestamp, headers)
        elif self.left:
            self.forward(key, self.joiner(key, value, None), timestamp, headers)

    def _drop(self, key: Any) -> None:
        self.context.task.dropped_records += 1
        log.debug("stream-table join: dropping record with key %r (null key, value or table key)", key)


# ---------------------------------------------------------------------------- table-table


class JoinSide:
    """One side's join processor spec: how it combines its change with the other side."""

    def __init__(self, kind: str, joiner: Joiner, other: ValueGetterSupplier) -> None:
        #: "inner" | "left" (this is the left of a left join) | "right" | "outer"
        self.kind = kind
        self.joiner = joiner
        self.other = other
        self.send_old_values = False


class TableJoinProcessor(NodeProcessor):
    """Kafka Streams' ``KTableKTable{Inner,Left,Right,Outer}Join`` processors."""

    def __init__(self, side: JoinSide) -> None:
        self.side = side

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self._get: ValueGetter = self.side.other.getter(context)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if key is None:
            self.context.task.dropped_records += 1  # as KTableKTableJoin's droppedRecordsSensor
            return
        if not change.is_latest:
            # an out-of-order update of a versioned table: joins use versioned semantics (KIP-914)
            log.debug("table-table join: skipping out-of-order versioned update for key %r", key)
            return
        side = self.side
        joiner, send_old = side.joiner, side.send_old_values
        found = self._get(key)
        other = found.value if found is not None else None
        new = old = None
        if side.kind in ("inner", "right"):
            if other is None:
                return
            if side.kind == "right":  # this is the right of a left join: the left row decides
                new = joiner(key, change.new, other)
                old = joiner(key, change.old, other) if send_old else None
            else:
                new = joiner(key, change.new, other) if change.new is not None else None
                old = joiner(key, change.old, other) if send_old and change.old is not None else None
        else:
            if other is None and change.new is None and change.old is None:
                return
            outer = side.kind == "outer" and other is not None
            if change.new is not None or outer:
                new = joiner(key, change.new, other)
            if send_old and (change.old is not None or outer):
                old = joiner(key, change.old, other)
        if found is not None and found.timestamp > timestamp:
            timestamp = found.timestamp
        self.forward(key, Change(new, old), timestamp, headers)


class JoinMergeOp(TableOp):
    """The KTable of a table-table join (Kafka's ``KTableKTableJoinMerger``)."""

    def __init__(
        self,
        parents: tuple[TableOp, TableOp],
        sides: tuple[JoinSide, JoinSide],
        views: tuple[ValueGetterSupplier, ValueGetterSupplier],
        kind: str,
        store: str | None,
    ) -> None:
        self.parents = parents
        self.sides = sides
        self.views = views
        self.kind = kind
        self.store_name = store

    def enable_send_old_values(self, force_materialization: bool) -> bool:
        for parent, side in zip(self.parents, self.sides, strict=True):
            parent.enable_send_old_values(True)
            side.send_old_values = True
        self.send_old_values = True
        return True

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return _JoinValueGetterSupplier(self.views, self.sides[0].joiner, self.kind)

    def make_processor(self) -> NodeProcessor:
        return JoinMergeProcessor(self)


class JoinMergeProcessor(TableProcessor):
    def __init__(self, op: JoinMergeOp) -> None:
        self.op = op

    def init(self, context: NodeContext) -> None:
        self.bind_store(context, self.op.store_name, self.op.send_old_values)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if self.store is None:
            self.forward(key, change, timestamp, headers)
        else:
            self.put(key, change.new, timestamp, headers)


class _JoinValueGetterSupplier(ValueGetterSupplier):
    """The joined row computed from both sides' getters (an unmaterialized join's view)."""

    def __init__(
        self, views: tuple[ValueGetterSupplier, ValueGetterSupplier], joiner: Joiner, kind: str
    ) -> None:
        self.views = views
        self.joiner = joiner
        self.kind = kind

    def store_names(self) -> list[str]:
        return list(dict.fromkeys(self.views[0].store_names() + self.views[1].store_names()))

    def getter(self, context: NodeContext) -> ValueGetter:
        get_left, get_right = (v.getter(context) for v in self.views)
        joiner, kind = self.joiner, self.kind

        def get(key: Any) -> ValueAndTimestamp | None:
            left, right = get_left(key), get_right(key)
            if left is None and (kind != "outer" or right is None):
                return None
            if right is None and kind == "inner":
                return None
            value = joiner(key, left.value if left else None, right.value if right else None)
            timestamp = max(left.timestamp if left else -1, right.timestamp if right else -1)
            return ValueAndTimestamp(value, timestamp) if value is not None else None

        return get
