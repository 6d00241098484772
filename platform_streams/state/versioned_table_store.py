"""The store behind a *versioned* KTable (KIP-914): the DSL's table-store face over a versioned store.

``builder.table(topic, materialized=Materialized.as_(Stores.persistent_versioned_key_value_store(...)))``
gives the table this store instead of a
:class:`~platform_streams.state.timestamped_kv_store.TimestampedKeyValueStore`. It speaks the same
language to the DSL's processors (``get_timestamped`` / ``put_timestamped`` / a flush listener)
and adds what only a versioned table can answer: :meth:`get_as_of` (a stream-table join looks
the table up as of the stream record's time).

Writes follow Kafka Streams' ``KTableSource`` over a versioned store: the write is a version
put; a write older than the history retention is dropped (not forwarded); an out-of-order
write (an older version: the put returned a validTo) is stored and forwarded flagged as not
the latest (``Change.is_latest``), through :meth:`set_out_of_order_listener`. There is no
cache: every write is forwarded at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from platform_streams.state.api import FlushListener, StateStore
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.timestamped_builders import SpecStore, resolve_serde
from platform_streams.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    MeteredVersionedKeyValueStore,
    VersionedKeyValueStoreBuilder,
    VersionedRecord,
)
from platform_streams.state.wrappers.change_logging import ChangelogRegisteringContext

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext
    from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder

__all__ = ["VersionedTableStore"]


class VersionedTableStore(SpecStore):
    """A versioned KTable's store; ``wrapped`` (the metered versioned stack) exists from ``init`` on."""

    versioned = True
    spec: TimestampedKeyValueStoreBuilder

    def __init__(self, spec: TimestampedKeyValueStoreBuilder) -> None:
        super().__init__(spec)
        self._listener: FlushListener | None = None
        self._out_of_order: FlushListener | None = None

    @property
    def caching_enabled(self) -> bool:
        return False

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        spec = self.spec
        config = context.config
        builder = VersionedKeyValueStoreBuilder(
            spec.versioned_supplier(),
            resolve_serde(spec.key_serde, config, "key"),
            resolve_serde(spec.value_serde, config, "value"),
        )
        reuse = spec.source_changelog_topic
        if spec.logging_enabled and reuse is None:
            builder.with_logging_enabled(spec.log_config)
        else:
            builder.with_logging_disabled()
        self.wrapped = builder.build()
        # a source topic used as changelog carries the version timestamps as record timestamps
        inner_context = context if reuse is None else ChangelogRegisteringContext(context, reuse)
        self.wrapped.init(inner_context, root)

    def _require(self) -> MeteredVersionedKeyValueStore:
        store: MeteredVersionedKeyValueStore = super()._require()
        return store

    @property
    def versioned_store(self) -> MeteredVersionedKeyValueStore:
        """The versioned store itself (``put(key, value, ts)``, ``get(key, as_of)``, ...)."""
        return self._require()

    def flush(self) -> None:
        self._require().flush()

    def flush_cache(self) -> None:
        """Nothing to flush: versioned stores never cache."""

    def close(self) -> None:
        if self.wrapped is not None:
            self.wrapped.close()

    def wipe(self) -> None:
        self._require().wipe()

    # ------------------------------------------------------------------ emission

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool = True) -> bool:
        """``listener(key, new, old, timestamp)`` for every write that became the latest version."""
        self._listener = listener
        return False

    def set_out_of_order_listener(self, listener: FlushListener) -> None:
        """``listener(key, new, old, timestamp)`` for writes stored as older versions."""
        self._out_of_order = listener

    # ------------------------------------------------------------------ DSL access

    def get_timestamped(self, key: Any) -> ValueAndTimestamp | None:
        record = self._require().get(key)
        return None if record is None else ValueAndTimestamp(record.value, record.timestamp)

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp | None:
        """The table's value for ``key`` as of ``timestamp`` (None: absent then, or beyond history)."""
        record = self._require().get(key, timestamp)
        return None if record is None else ValueAndTimestamp(record.value, record.timestamp)

    def put_timestamped(self, key: Any, value: Any, timestamp: int) -> int:
        """Put a version (None: a tombstone) and tell the listeners; returns the put's result."""
        store = self._require()
        old = store.get(key)
        code = store.put(key, value, timestamp)
        if code == PUT_RETURN_CODE_NOT_PUT:
            return code
        listener = self._listener if code == PUT_RETURN_CODE_VALID_TO_UNDEFINED else self._out_of_order
        if listener is not None:  # Kafka forwards even a delete of an absent key, uncached
            listener(key, value, None if old is None else old.value, timestamp)
        return code

    def get(self, key: Any, as_of_timestamp: int | None = None) -> Any:
        """The latest value (or the one as of ``as_of_timestamp``), without its timestamp."""
        record = self._require().get(key, as_of_timestamp)
        return None if record is None else record.value

    def get_versioned(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        return self._require().get(key, as_of_timestamp)

    def approximate_num_entries(self) -> int:
        return self._require().approximate_num_entries()

    def __repr__(self) -> str:
        return f"VersionedTableStore({self.spec.name!r})"
