"""The metered layer's shared part: serdes, metrics hook, and change forwarding.

The metered store is the outermost layer and the only one that knows the key and value
serdes (Kafka Streams' ``Metered*Store``): everything below it is bytes. It also:

* times operations through a metrics hook when one is installed (``set_metrics_hook``);
  without one the hot path pays a single ``is None`` test per operation;
* makes a flush listener work with caching off: every write is forwarded at once, with the
  previous value read first only when the listener asked for old values (or for a delete,
  to skip deletes of absent keys) -- the same rule the caching layer applies at flush.

Serdes nobody gave (``None``: no ``Materialized.with_key_serde`` and nothing inherited) are
resolved in :meth:`MeteredStore.init` from the task's config (``default_key_serde`` /
``default_value_serde``), as Kafka Streams' ``MeteredKeyValueStore.initStoreSerde`` does: a
store builder never needs the config, and nothing shared between tasks is mutated. A
timestamped store (the DSL's) wraps the value serde in ``ValueAndTimestampSerde`` at that point.

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

    #: bound in ``__init__`` when both serdes are given, else in ``init`` (from the config)
    key_serde: Serde
    value_serde: Serde

    def __init__(
        self,
        wrapped: Any,
        key_serde: Serde | None,
        value_serde: Serde | None,
        value_serde_wrapper: Callable[[Serde], Serde] | None = None,
    ) -> None:
        super().__init__(wrapped)
        #: the serdes as given (None: the config's default, resolved in ``init``)
        self._given_serdes = (key_serde, value_serde)
        self._value_serde_wrapper = value_serde_wrapper
        if key_serde is not None and value_serde is not None:
            self._bind_serdes(key_serde, value_serde)
        self._hook: StoreMetricsHook | None = None
        #: Set when a listener is installed and there is no caching layer below.
        self._forward: FlushListener | None = None
        self._send_old_values = False
        self._context: StateStoreContext | None = None

    def _bind_serdes(self, key_serde: Serde, value_serde: Serde) -> None:
        wrapper = self._value_serde_wrapper
        if wrapper is not None:
            value_serde = wrapper(value_serde)
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: the key serde is the identity for ``bytes`` keys: skip the call (see ``_raw_key``)
        self._bytes_keys = type(key_serde) is Bytes
        self._serialize_value = value_serde.serialize
        self._deserialize_value = value_serde.deserialize

    def _init_store_serde(self, context: StateStoreContext) -> None:
        """Kafka's ``initStoreSerde``: serdes nobody gave come from the task's config, and all
        serve the store's changelog topic (``<application>-<store>-changelog`` even when the
        store does not log, as ``ProcessorContextUtils.changelogFor``), so a Schema Registry
        serde registers under the changelog's subject as Kafka Streams' do."""
        given_key, given_value = self._given_serdes
        key_serde = given_key if given_key is not None else context.config.default_key_serde
        value_serde = given_value if given_value is not None else context.config.default_value_serde
        changelogs: Any = getattr(context, "changelog_topics", None) or {}
        app_id = getattr(context, "application_id", None)
        topic = changelogs.get(self.name) or (f"{app_id}-{self.name}-changelog" if app_id else None)
        if topic is not None:
            key_serde, value_serde = key_serde.for_topic(topic), value_serde.for_topic(topic)
        if key_serde is not given_key or value_serde is not given_value:
            self._bind_serdes(key_serde, value_serde)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._init_store_serde(context)
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
