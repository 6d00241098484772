"""The async operators of :class:`~platform_streams.dsl.kstream.KStream`: I/O-bound work with many
records in flight, in order per key (platform_streams/processor/async_processing.py,
docs/async-processing.md).

Each takes an ``async def`` (awaited on the process's event loop thread) or a blocking
function (run in the process's bounded thread pool), and an
:class:`~platform_streams.processor.async_runtime.AsyncOptions` (in-flight bounds, timeout,
retries). Results are forwarded on the stream thread; offsets are committed only once
every earlier record of the partition completed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.naming import takes_key
from platform_streams.dsl.options import Named, name_of
from platform_streams.processor.async_processing import FILTER, FOREACH, MAP_VALUES, PROCESS, AsyncNode
from platform_streams.processor.async_runtime import AsyncOptions

if TYPE_CHECKING:
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.dsl.kstream import KStream
    from platform_streams.serde import Serde

__all__ = ["AsyncStreamOps"]


class AsyncStreamOps:
    """``map_values_async``, ``filter_async``, ``foreach_async`` and ``process_async``."""

    if TYPE_CHECKING:
        _builder: StreamsBuilder
        node_name: str
        key_serde: Serde | None
        value_serde: Serde | None
        repartition_required: bool
        source_topics: frozenset[str]

        def _add_processor(
            self, name: str, make: Callable[[], Any], supplier: Any, store_names: tuple[str, ...]
        ) -> None: ...

    def map_values_async(
        self,
        mapper: Callable[..., Any],
        options: AsyncOptions | None = None,
        named: Named | str | None = None,
    ) -> KStream:
        """New value from ``await mapper(value)`` (or ``mapper(key, value)``); the key is unchanged."""
        return self._async("KSTREAM-MAPVALUES-ASYNC-", MAP_VALUES, mapper, options, named, value_kept=False)

    def filter_async(
        self,
        predicate: Callable[..., Any],
        options: AsyncOptions | None = None,
        named: Named | str | None = None,
    ) -> KStream:
        """Keep the records for which ``await predicate(key, value)`` (or ``predicate(value)``) is true."""
        return self._async("KSTREAM-FILTER-ASYNC-", FILTER, predicate, options, named, value_kept=True)

    def foreach_async(
        self,
        action: Callable[..., Any],
        options: AsyncOptions | None = None,
        named: Named | str | None = None,
    ) -> None:
        """Run ``await action(key, value)`` (or ``action(value)``) per record; a terminal operation."""
        self._async("KSTREAM-FOREACH-ASYNC-", FOREACH, action, options, named, value_kept=True)

    def process_async(
        self,
        fn: Callable[..., Any],
        *store_names: str,
        options: AsyncOptions | None = None,
        named: Named | str | None = None,
    ) -> KStream:
        """``await fn(record, ctx)`` per record: ``ctx.forward(record)`` sends records downstream,
        ``ctx.get/put/delete(store)`` read and write the record key's entry of a connected
        key-value store (:class:`~platform_streams.processor.async_processing.AsyncRecordContext`).
        The key may change, so a later grouping repartitions, as after ``process``."""
        from platform_streams.dsl.kstream import KStream

        name = name_of(named) or self._builder.names.name("KSTREAM-PROCESSOR-ASYNC-")

        def make() -> AsyncNode:
            return AsyncNode(fn, PROCESS, options, store_names=store_names)

        self._add_processor(name, make, make, store_names)
        return KStream(self._builder, name, repartition_required=True, source_topics=self.source_topics)

    def _async(
        self,
        prefix: str,
        kind: str,
        fn: Callable[..., Any],
        options: AsyncOptions | None,
        named: Named | str | None,
        *,
        value_kept: bool,
    ) -> KStream:
        from platform_streams.dsl.kstream import KStream

        if not callable(fn):
            raise TypeError(f"{kind}_async needs a function, got {fn!r}")
        name = name_of(named) or self._builder.names.name(prefix)
        with_key = takes_key(fn)

        def make() -> AsyncNode:
            return AsyncNode(fn, kind, options, with_key=with_key)

        self._add_processor(name, make, make, ())
        return KStream(
            self._builder,
            name,
            key_serde=self.key_serde,
            value_serde=self.value_serde if value_kept else None,
            repartition_required=self.repartition_required,
            source_topics=self.source_topics,
        )
