"""The table node of a windowed aggregation at run time: its close rule and value getter.

:class:`WindowCloseRule` says when a window closes (``suppress(until_window_closes)``
and emit-final read it); :class:`WindowedTableOp` is the aggregation's table op, whose
view reads the window or session store by ``Windowed`` key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from platform_streams.dsl.internals.table_processors import StoreTableOp, ValueGetterSupplier
from platform_streams.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from platform_streams.processor.node import NodeProcessor
from platform_streams.serde import Serde
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.timestamped_builders import resolve_serde

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.processor.context import NodeContext
    from platform_streams.state.timestamped_kv_store import ValueGetter

__all__ = ["WindowCloseRule", "WindowedTableOp", "WindowedValueGetterSupplier"]


@dataclass(frozen=True)
class WindowCloseRule:
    """When a windowed table's windows close, for ``suppress(until_window_closes(...))``.

    A window is closed when ``window.end + end_offset <= stream time - wait_ms``;
    ``wait_ms`` is the grace (plus the inactivity gap for sessions). ``end_offset`` is 1
    for sliding windows, whose end is inclusive (Kafka Streams uses 0, which lets a record
    at exactly ``end + grace`` update a window already emitted), 0 otherwise.
    """

    kind: Literal["time", "sliding", "session"]
    wait_ms: int
    end_offset: int
    inner_key_serde: Serde | None
    window_size_ms: int | None

    def windowed_serde(self, inner: Serde) -> Serde:
        """The serde of this table's ``Windowed`` keys over the record key serde ``inner``."""
        if self.kind == "session":
            return SessionWindowedSerde(inner)
        return TimeWindowedSerde(inner, self.window_size_ms)

    def key_serde(self, config: StreamsConfig) -> Serde:
        """The windowed key serde, the inner serde resolved against the config defaults."""
        return self.windowed_serde(resolve_serde(self.inner_key_serde, config, "key"))

    def buffer_time(self, key: Any) -> int:
        """The stream time (minus ``wait_ms``) at which the window of ``key`` closes."""
        end: int = key.window.end_ms
        return end + self.end_offset


class WindowedTableOp(StoreTableOp):
    """The table node of a windowed aggregation: a store op that knows its windows."""

    def __init__(
        self, store_name: str, make: Callable[[StoreTableOp], NodeProcessor], close_rule: WindowCloseRule
    ) -> None:
        super().__init__(store_name, make)
        self.close_rule = close_rule

    def view(self) -> ValueGetterSupplier:
        assert self.store_name is not None
        return WindowedValueGetterSupplier(self.store_name, self.close_rule.kind == "session")


class WindowedValueGetterSupplier(ValueGetterSupplier):
    """Reads a windowed aggregate by ``Windowed`` key (Kafka's ``KStreamWindowAggregateValueGetter``)."""

    def __init__(self, store: str, session: bool) -> None:
        self.store = store
        self.session = session

    def store_names(self) -> list[str]:
        return [self.store]

    def getter(self, context: NodeContext) -> ValueGetter:
        store = context.get_state_store(self.store)
        if self.session:

            def get_session(key: Any) -> ValueAndTimestamp | None:
                window = key.window
                agg = store.fetch_session(key.key, window.start_ms, window.end_ms)
                return None if agg is None else ValueAndTimestamp(agg, window.end_ms)

            return get_session

        def get_window(key: Any) -> ValueAndTimestamp | None:
            vat: ValueAndTimestamp | None = store.fetch_timestamped(key.key, key.window.start_ms)
            return vat

        return get_window
