"""The metered layer's shared part: serdes, metrics hook, and change forwarding.

The metered store is the outermost layer and the only one that knows the key and value
serdes (Kafka Streams' ``Metered*Store``): everything below it is bytes. It also:

* times operations through a metrics hook when one is installed (``set_metrics_hook``);
  without one the hot path pays a single ``is None`` test per operation;
* makes a flush listener work with caching off: every write is forwarded at once, with the
  previous value read first only when the listener asked for old values (or for a delete,
  to skip deletes of absent keys) -- the same rule the caching layer applies at flush.

Every get/put of a DSL aggregation passes here, so the serde methods are bound once and a
``bytes`` key of a ``Bytes`` key serde (the identity) is used as it is, without a call.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from platform_streams.serde.primitive import Bytes
from platform_streams.state.api import CachedStateStore, FlushListener, StateStore
from platform_streams.state.wrappers.base import WrappedStore, record_timestamp
from platform_streams.state.wrappers.caching_key_value import CachingKeyValueStore
from platform_streams.state.wrappers.caching_windowed import CachingSessionStore, CachingWindowStore

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["MeteredStore", "StoreMetricsHook"]

#: ``(store name, operation, latency in ns)``; the metrics package will provide one.
StoreMetricsHook = Callable[[str, str, int], None]

_CACHING = (CachingKeyValueStore, CachingWindowStore, CachingSessionStore)


class MeteredStore(WrappedStore, CachedStateStore):
    """Base of the three metered stores."""

    def __init__(self, wrapped: Any, key_serde: Serde, value_serde: Serde) -> None:
        super().__init__(wrapped)
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: the key serde is the identity for ``bytes`` keys: skip the call (see ``_raw_key``)
        self._bytes_keys = type(key_serde) is Bytes
        self._serialize_value = value_serde.serialize
        self._deserialize_value = value_serde.deserialize
        self._hook: StoreMetricsHook | None = None
        #: Set when a listener is installed and there is no caching layer below.
        self._forward: FlushListener | None = None
        self._send_old_values = False
        self._context: StateStoreContext | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._context = context
        start = perf_counter_ns()
        self.wrapped.init(context, root)
        self._record("init", start)

    @property
    def caching_enabled(self) -> bool:
        return isinstance(self.wrapped, _CACHING)

    def set_metrics_hook(self, hook: StoreMetricsHook | None) -> None:
        """Install (or remove) the metrics hook that receives operation latencies."""
        self._hook = hook

    def _record(self, operation: str, start_ns: int) -> None:
        hook = self._hook
        if hook is not None:
            hook(self.name, operation, perf_counter_ns() - start_ns)

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool = True) -> bool:
        self._send_old_values = send_old_values
        wrapped = self.wrapped
        if isinstance(wrapped, _CACHING):
            wrapped.set_flush_listener(self._deserializing(listener), send_old_values)
            self._forward = None
            return True
        self._forward = listener
        return False

    def _deserializing(self, listener: FlushListener) -> FlushListener:
        """Adapt a listener of objects to the bytes the caching layer flushes."""
        deserialize_key = self._deserialize_flushed_key
        deserialize_value = self.value_serde.deserialize

        def on_flush(key: Any, new: bytes | None, old: bytes | None, timestamp: int) -> None:
            listener(
                deserialize_key(key),
                deserialize_value(new) if new is not None else None,
                deserialize_value(old) if old is not None else None,
                timestamp,
            )

        return on_flush

    def _deserialize_flushed_key(self, key: Any) -> Any:
        return self.key_serde.deserialize(key)

    def _timestamp(self) -> int:
        context = self._context
        return record_timestamp(context) if context is not None else 0

    def _raw_key(self, key: Any) -> bytes:
        """The serialized key; a ``bytes`` key of a ``Bytes`` serde is returned as it is."""
        if type(key) is bytes and self._bytes_keys:
            return key
        return self._serialize_key(key)

    def _serialize_key(self, key: Any) -> bytes:
        raw = self.key_serde.serialize(key)
        if raw is None:
            raise ValueError(f"store {self.name}: keys cannot be None")
        return raw

    def flush_cache(self) -> None:
        wrapped = self.wrapped
        if isinstance(wrapped, _CACHING):
            wrapped.flush_cache()

    def flush(self) -> None:
        start = perf_counter_ns()
        self.wrapped.flush()
        self._record("flush", start)
