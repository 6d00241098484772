"""Store builders: how a topology describes a store and builds one instance per task.

Kafka Streams' ``StoreBuilder``: a builder carries the name, serdes, and the caching and
logging choices (caching off and logging on by default, as in Kafka Streams), and
``build()`` assembles the wrapper stack ``metered -> [caching] -> [change-logging] ->
bytes store`` around a fresh bytes store from its supplier. The topology compiler also
asks it for the changelog topic's configuration.

Serdes may be left ``None``: the metered layer then takes the config's defaults when a task
initialises the store (Kafka Streams' ``MeteredKeyValueStore.initStoreSerde``). That is how
the DSL's stores, built by these same builders, get ``default_key_serde`` /
``default_value_serde`` without knowing the config when the topology is built. A
``timestamped`` builder (Kafka's ``TimestampedKeyValueStoreBuilder`` /
``TimestampedWindowStoreBuilder``) stores ``ValueAndTimestamp`` values through the same
stack: its metered layer wraps the value serde.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from platform_streams.state.api import StateStore
from platform_streams.state.timestamped import ValueAndTimestampSerde
from platform_streams.state.wrappers.base import WrappedStore
from platform_streams.state.wrappers.caching_key_value import CachingKeyValueStore
from platform_streams.state.wrappers.caching_windowed import CachingSessionStore, CachingWindowStore
from platform_streams.state.wrappers.change_logging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    logging_layer,
)
from platform_streams.state.wrappers.metered_key_value import MeteredKeyValueStore
from platform_streams.state.wrappers.metered_windowed import MeteredSessionStore, MeteredWindowStore

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.stores import (
        KeyValueBytesStoreSupplier,
        SessionBytesStoreSupplier,
        WindowBytesStoreSupplier,
    )

__all__ = [
    "WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS",
    "KeyValueStoreBuilder",
    "SessionStoreBuilder",
    "StoreBuilder",
    "SupplierStoreBuilder",
    "WindowStoreBuilder",
]

log = logging.getLogger(__name__)

#: Kafka Streams' ``windowstore.changelog.additional.retention.ms`` default (1 day): the
#: changelog keeps windowed records this much longer than the store, against clock drift.
WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS = 86_400_000

S = TypeVar("S", bound=StateStore)


class StoreBuilder(ABC, Generic[S]):
    """Describes one store of a topology; ``build()`` makes the instance of one task."""

    def __init__(self, name: str, key_serde: Serde | None, value_serde: Serde | None) -> None:
        self._name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._caching = False
        self._logging = True
        self._log_config: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def caching_enabled(self) -> bool:
        return self._caching

    @property
    def logging_enabled(self) -> bool:
        return self._logging

    @property
    def log_config(self) -> dict[str, str]:
        """User overrides of the changelog topic config (a copy)."""
        return dict(self._log_config)

    def with_caching_enabled(self) -> Self:
        self._caching = True
        return self

    def with_caching_disabled(self) -> Self:
        self._caching = False
        return self

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> Self:
        self._logging = True
        self._log_config = {str(k): str(v) for k, v in (config or {}).items()}
        return self

    def with_logging_disabled(self) -> Self:
        self._logging = False
        self._log_config = {}
        return self

    @abstractmethod
    def changelog_topic_config(self) -> dict[str, str]:
        """Config of the changelog topic (defaults, then the user's overrides)."""

    @abstractmethod
    def build(self) -> S:
        """A new, uninitialised store stack (one per task)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, caching={self._caching}, logging={self._logging})"


def _value_wrapper(timestamped: bool) -> Callable[[Serde], Serde] | None:
    return ValueAndTimestampSerde if timestamped else None


class SupplierStoreBuilder(StoreBuilder[S]):
    """A builder over a bytes-store supplier: ``build()`` wraps a fresh bytes store in this
    kind's change-logging layer (when logging), caching layer (when caching) and metered
    layer, the stack every kind shares; each kind names its layers."""

    #: the change-logging layer of this kind of store
    logging_layer: ClassVar[type[WrappedStore]]
    #: the caching layer (None: this kind is never cached)
    caching_layer: ClassVar[type[WrappedStore] | None] = None

    def __init__(
        self, supplier: Any, key_serde: Serde | None, value_serde: Serde | None, *, timestamped: bool = False
    ) -> None:
        super().__init__(supplier.name, key_serde, value_serde)
        self.supplier = supplier
        #: the values are ``ValueAndTimestamp`` (Kafka's timestamped store builders)
        self.timestamped = timestamped

    def build(self) -> S:
        store: Any = self.supplier.get()
        caching_layer = self.caching_layer if self._caching else None
        if self._logging:
            store = self.logging_layer(store)
            logged = logging_layer(store)
            if logged is not None:  # a versioned store's layer stamps its own changes
                logged.stamp_values(values_timestamped=self.timestamped)
        if caching_layer is not None:
            store = caching_layer(store)
        return self._metered(store)

    @abstractmethod
    def _metered(self, store: Any) -> S:
        """The outermost layer, over ``store`` (typed keys and values, metrics)."""


class KeyValueStoreBuilder(SupplierStoreBuilder[MeteredKeyValueStore]):
    #: a DSL bookkeeping store whose type no one chose (a stream-stream join's outer store):
    #: the run-time ``dsl_store_suppliers`` may still pick it (``apply_dsl_store_config``)
    dsl_default: bool = False
    supplier: KeyValueBytesStoreSupplier
    logging_layer = ChangeLoggingKeyValueStore
    caching_layer = CachingKeyValueStore

    def changelog_topic_config(self) -> dict[str, str]:
        return {"cleanup.policy": "compact", **self._log_config}

    def _metered(self, store: Any) -> MeteredKeyValueStore:
        return MeteredKeyValueStore(store, self.key_serde, self.value_serde, _value_wrapper(self.timestamped))


def _windowed_changelog_config(retention_ms: int, overrides: dict[str, str]) -> dict[str, str]:
    config = {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(retention_ms + WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS),
    }
    config.update(overrides)
    return config


class WindowStoreBuilder(SupplierStoreBuilder[MeteredWindowStore]):
    supplier: WindowBytesStoreSupplier
    logging_layer = ChangeLoggingWindowStore
    caching_layer = CachingWindowStore

    def with_caching_enabled(self) -> Self:
        if self.supplier.retain_duplicates:
            # Kafka Streams' rule: deduplicating would drop the duplicates the store must keep.
            log.warning("store %s retains duplicates: caching stays disabled", self._name)
            return self
        return super().with_caching_enabled()

    def changelog_topic_config(self) -> dict[str, str]:
        return _windowed_changelog_config(self.supplier.retention_ms, self._log_config)

    def _metered(self, store: Any) -> MeteredWindowStore:
        return MeteredWindowStore(store, self.key_serde, self.value_serde, _value_wrapper(self.timestamped))


class SessionStoreBuilder(SupplierStoreBuilder[MeteredSessionStore]):
    supplier: SessionBytesStoreSupplier
    logging_layer = ChangeLoggingSessionStore
    caching_layer = CachingSessionStore

    def __init__(
        self, supplier: SessionBytesStoreSupplier, key_serde: Serde | None, value_serde: Serde | None
    ) -> None:
        super().__init__(supplier, key_serde, value_serde)

    def changelog_topic_config(self) -> dict[str, str]:
        return _windowed_changelog_config(self.supplier.retention_ms, self._log_config)

    def _metered(self, store: Any) -> MeteredSessionStore:
        return MeteredSessionStore(store, self.key_serde, self.value_serde)
