"""Option objects of the DSL (Kafka Streams' Consumed, Produced, Grouped, ...).

Keyword dataclasses instead of Java's static factories: ``Consumed(key_serde=String())``
reads the same and type-checks. ``as_``/``with_`` class methods exist where Kafka
Streams users expect them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from platform_streams.serde import Serde


@dataclass(frozen=True, kw_only=True)
class Named:
    """Names a DSL operator's processor node (and derived internal topics/stores)."""

    name: str | None = None

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(name=name)


@dataclass(frozen=True, kw_only=True)
class Consumed:
    """How a source topic is read: serdes, timestamp extractor, offset reset, node name."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    timestamp_extractor: Callable[[Any, Any, int, int], int] | None = None
    offset_reset: Literal["earliest", "latest"] | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde: Serde | None, value_serde: Serde | None) -> Consumed:
        return cls(key_serde=key_serde, value_serde=value_serde)


@dataclass(frozen=True, kw_only=True)
class Produced:
    """How records are written: serdes, partitioner ``(topic, key, value, n) -> partition``."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    partitioner: Callable[[str, Any, Any, int], int | None] | None = None
    name: str | None = None

    @classmethod
    def with_(cls, key_serde: Serde | None, value_serde: Serde | None) -> Produced:
        return cls(key_serde=key_serde, value_serde=value_serde)


@dataclass(frozen=True, kw_only=True)
class Grouped:
    """Serdes and name for a grouping; the name names the repartition topic."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    name: str | None = None

    @classmethod
    def as_(cls, name: str) -> Grouped:
        return cls(name=name)


@dataclass(frozen=True, kw_only=True)
class Repartitioned:
    """Explicit repartitioning: serdes, partition count, partitioner, topic name."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    num_partitions: int | None = None
    partitioner: Callable[[str, Any, Any, int], int | None] | None = None
    name: str | None = None

    @classmethod
    def as_(cls, name: str) -> Repartitioned:
        return cls(name=name)


@dataclass(frozen=True, kw_only=True)
class Materialized:
    """How a KTable / aggregation result is stored: store name, serdes, backend, caching, logging.

    ``store_type`` is ``"rocksdb"`` (persistent) or ``"in_memory"``; ``store_supplier``
    overrides it with a supplier from :class:`platform_streams.state.Stores`.
    ``retention_ms`` applies to window/session stores.
    """

    store_name: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    store_type: Literal["rocksdb", "in_memory"] = "rocksdb"
    store_supplier: Any = None
    caching_enabled: bool = True
    logging_enabled: bool = True
    log_config: dict[str, str] | None = None
    retention_ms: int | None = None

    @classmethod
    def as_(cls, store_name: str) -> Materialized:
        return cls(store_name=store_name)

    def with_key_serde(self, serde: Serde) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Materialized:
        return replace(self, value_serde=serde)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching_enabled=False)

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging_enabled=False)

    def with_retention(self, retention_ms: int) -> Materialized:
        """Retention of a window/session store (at least window size + grace)."""
        return replace(self, retention_ms=retention_ms)


@dataclass(frozen=True, kw_only=True)
class Joined:
    """Serdes and name for a stream-table join (``other_value_serde`` is the table side)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None
    grace_ms: int | None = None


@dataclass(frozen=True, kw_only=True)
class StreamJoined:
    """Serdes, name and store settings for a windowed stream-stream join."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None
    store_name: str | None = None
    store_type: Literal["rocksdb", "in_memory"] = "rocksdb"
    logging_enabled: bool = True
    #: window store suppliers of the two sides (Kafka's ``StreamJoined.with(thisSupplier,
    #: otherSupplier)``): their names name the stores; they must retain duplicates
    this_store_supplier: Any = None
    other_store_supplier: Any = None

    @classmethod
    def with_(cls, this_store_supplier: Any, other_store_supplier: Any) -> StreamJoined:
        return cls(this_store_supplier=this_store_supplier, other_store_supplier=other_store_supplier)

    def with_name(self, name: str) -> StreamJoined:
        return replace(self, name=name)

    def with_key_serde(self, serde: Serde) -> StreamJoined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> StreamJoined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Serde) -> StreamJoined:
        return replace(self, other_value_serde=serde)


@dataclass(frozen=True, kw_only=True)
class Branched:
    """One branch of ``KStream.split()``: its name and an optional function over the branch."""

    name: str | None = None
    chain: Callable[[Any], Any] | None = None

    @classmethod
    def as_(cls, name: str) -> Branched:
        return cls(name=name)

    @classmethod
    def with_function(cls, chain: Callable[[Any], Any], name: str | None = None) -> Branched:
        return cls(name=name, chain=chain)


def name_of(named: Named | str | None) -> str | None:
    """Accept ``Named``, a plain string, or None wherever a name may be given."""
    if named is None or isinstance(named, str):
        return named
    return named.name
