"""Option objects of the DSL (Kafka Streams' Consumed, Produced, Grouped, ...).

Keyword dataclasses instead of Java's static factories: ``Consumed(key_serde=String())``
reads the same and type-checks. ``as_``/``with_`` class methods exist where Kafka
Streams users expect them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from platform_streams.errors import TopologyError
from platform_streams.serde import Serde
from platform_streams.state.dsl_store_suppliers import DslStoreSuppliers

_LEGAL_NAME = re.compile(r"[A-Za-z0-9._-]+")
_MAX_NAME_LENGTH = 249


def validate_name(name: str) -> str:
    """Kafka's ``Named.validate``: operator and store names become parts of topic names, so
    they are refused (at the call) unless made of ASCII alphanumerics, '.', '_' and '-'."""
    if not name:
        raise TopologyError("Name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopologyError('Name cannot be "." or ".."')
    if len(name) > _MAX_NAME_LENGTH:
        raise TopologyError(
            f"Name is illegal, it can't be longer than {_MAX_NAME_LENGTH} characters, name: {name}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise TopologyError(
            f'Name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )
    return name


@dataclass(frozen=True, kw_only=True)
class Named:
    """Names a DSL operator's processor node (and derived internal topics/stores)."""

    name: str | None = None

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(name=validate_name(name))


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
    #: state TTL of a key-value store (``with_ttl``; not a Kafka Streams option)
    ttl_ms: int | None = None
    #: how often (in stream time) expired entries are swept out; None: every ``ttl_ms``
    ttl_sweep_interval_ms: int | None = None

    #: KIP-954: the operator's stores come from these (``with_dsl_store_suppliers``)
    dsl_store_suppliers: DslStoreSuppliers | None = None

    @classmethod
    def as_(cls, store: Any) -> Materialized:
        """``Materialized.as_("name")``, a store supplier (``Stores.*``, versioned too), or a
        :class:`~platform_streams.state.DslStoreSuppliers` (KIP-954)."""
        if isinstance(store, str):
            return cls(store_name=validate_name(store))
        if isinstance(store, DslStoreSuppliers):
            return cls().with_dsl_store_suppliers(store)
        return cls(store_supplier=store)

    def with_dsl_store_suppliers(self, suppliers: DslStoreSuppliers) -> Materialized:
        """Take the operator's stores from ``suppliers`` (Kafka's ``Materialized.as(DslStoreSuppliers)``)."""
        return replace(self, dsl_store_suppliers=suppliers, store_type=suppliers.store_type)

    def with_store_type(self, store_type: Literal["rocksdb", "in_memory"]) -> Materialized:
        """Kafka's ``Materialized.withStoreType``: RocksDB or in-memory stores (the built-in
        suppliers, so the choice also beats the application's ``dsl_store_suppliers``)."""
        from platform_streams.state.dsl_store_suppliers import BuiltInDslStoreSuppliers

        builtin = (
            BuiltInDslStoreSuppliers.IN_MEMORY
            if store_type == "in_memory"
            else BuiltInDslStoreSuppliers.ROCKS_DB
        )
        return self.with_dsl_store_suppliers(builtin)

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

    def with_ttl(
        self, ttl: int | timedelta, sweep_interval: int | timedelta | None = None
    ) -> Materialized:
        """State TTL of a key-value store (aggregations, tables; not a Kafka Streams option).

        An entry whose timestamp (the table row's: the record's, an aggregate's the largest
        aggregated) plus ``ttl`` is at most the task's stream time reads as absent, and a sweep
        every ``sweep_interval`` of stream time (default: ``ttl``) deletes it -- a changelog
        tombstone and a tombstone downstream (README, "State TTL"). Milliseconds or timedeltas.
        """
        ttl_ms = _positive_ms("ttl", ttl)
        sweep_ms = ttl_ms if sweep_interval is None else _positive_ms("sweep_interval", sweep_interval)
        return replace(self, ttl_ms=ttl_ms, ttl_sweep_interval_ms=sweep_ms)


def _positive_ms(field: str, value: int | timedelta) -> int:
    """``value`` in whole milliseconds; a ValueError naming ``field`` unless it is positive."""
    ms = int(value.total_seconds() * 1000) if isinstance(value, timedelta) else value
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        raise ValueError(
            f"Materialized.with_ttl: {field} must be a positive number of ms or a timedelta, got {value!r}"
        )
    return ms


@dataclass(frozen=True, kw_only=True)
class Joined:
    """Serdes and name for a stream-table join (``other_value_serde`` is the table side)."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None
    grace_ms: int | None = None

    def with_grace_period(self, grace: int | timedelta) -> Joined:
        """Kafka's ``Joined.withGracePeriod`` (KIP-923): stream records wait this long (in stream
        time) in a buffer, then join the versioned table as of their own timestamps, so a late
        table update still reaches them. A join over a non-versioned table refuses it."""
        ms = grace if isinstance(grace, int) else int(grace.total_seconds() * 1000)
        return replace(self, grace_ms=ms)


@dataclass(frozen=True, kw_only=True)
class TableJoined:
    """Partitioners and name of a foreign-key table join (Kafka Streams' ``TableJoined``).

    ``partitioner(topic, key, value, n)`` places this table's keys (the response topic goes back
    to the partition it uses); ``other_partitioner`` places the foreign table's keys (the
    subscription topic). Both are needed only when a table's topic is not default-partitioned;
    they are called with ``value=None``, as Kafka does. ``name`` names the join's nodes, stores
    and topics (``<name>-subscription-registration-topic``, ...).
    """

    partitioner: Callable[[str, Any, Any, int], int | None] | None = None
    other_partitioner: Callable[[str, Any, Any, int], int | None] | None = None
    name: str | None = None

    @classmethod
    def with_(
        cls,
        partitioner: Callable[[str, Any, Any, int], int | None] | None,
        other_partitioner: Callable[[str, Any, Any, int], int | None] | None,
    ) -> TableJoined:
        return cls(partitioner=partitioner, other_partitioner=other_partitioner)

    @classmethod
    def as_(cls, name: str) -> TableJoined:
        return cls(name=name)

    def with_name(self, name: str) -> TableJoined:
        return replace(self, name=name)

    def with_partitioner(self, partitioner: Callable[[str, Any, Any, int], int | None]) -> TableJoined:
        return replace(self, partitioner=partitioner)

    def with_other_partitioner(self, partitioner: Callable[[str, Any, Any, int], int | None]) -> TableJoined:
        return replace(self, other_partitioner=partitioner)


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
    #: topic configs of the two join stores' changelogs (``with_logging_enabled(config)``)
    log_config: dict[str, str] | None = None
    #: window store suppliers of the two sides (Kafka's ``StreamJoined.with(thisSupplier,
    #: otherSupplier)``): their names name the stores; they must retain duplicates
    this_store_supplier: Any = None
    other_store_supplier: Any = None

    #: KIP-954: the join's stores come from these (``with_dsl_store_suppliers``)
    dsl_store_suppliers: DslStoreSuppliers | None = None

    @classmethod
    def with_(cls, this_store_supplier: Any, other_store_supplier: Any) -> StreamJoined:
        return cls(this_store_supplier=this_store_supplier, other_store_supplier=other_store_supplier)

    def with_this_store_supplier(self, supplier: Any) -> StreamJoined:
        return replace(self, this_store_supplier=supplier)

    def with_other_store_supplier(self, supplier: Any) -> StreamJoined:
        return replace(self, other_store_supplier=supplier)

    def with_dsl_store_suppliers(self, suppliers: DslStoreSuppliers) -> StreamJoined:
        """Kafka's ``StreamJoined.withDslStoreSuppliers``: the join's window and outer stores
        live where ``suppliers`` put them (explicit store suppliers still win)."""
        return replace(self, dsl_store_suppliers=suppliers, store_type=suppliers.store_type)

    def with_name(self, name: str) -> StreamJoined:
        return replace(self, name=name)

    def with_store_name(self, store_name: str) -> StreamJoined:
        """The base name of the join stores (``<name>-this-join-store`` / ``-other-join-store``)."""
        return replace(self, store_name=store_name)

    def with_logging_enabled(self, config: dict[str, str]) -> StreamJoined:
        """Changelog the join stores with these topic configs (Kafka's ``withLoggingEnabled``)."""
        return replace(self, logging_enabled=True, log_config=dict(config))

    def with_logging_disabled(self) -> StreamJoined:
        return replace(self, logging_enabled=False, log_config=None)

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
    #: ``with_function``: the branch's entry in the result map is what this returns (None: no entry)
    chain: Callable[[Any], Any] | None = None
    #: ``with_consumer``: called with the branch stream, which is then left out of the result map
    consumer: Callable[[Any], None] | None = None

    @classmethod
    def as_(cls, name: str) -> Branched:
        return cls(name=name)

    @classmethod
    def with_function(cls, chain: Callable[[Any], Any], name: str | None = None) -> Branched:
        return cls(name=name, chain=chain)

    @classmethod
    def with_consumer(cls, consumer: Callable[[Any], None], name: str | None = None) -> Branched:
        return cls(name=name, consumer=consumer)


def name_of(named: Named | str | None) -> str | None:
    """Accept ``Named``, a plain string, or None wherever a name may be given."""
    if named is None or isinstance(named, str):
        return named
    return named.name


def require_functions(where: str, **functions: Any) -> None:
    """Kafka's null checks (``Objects.requireNonNull``) of the functions an operator runs: a
    missing or non-callable one is a TypeError naming the parameter when the topology is
    built, not an error at the first record."""
    for param, function in functions.items():
        if not callable(function):
            raise TypeError(f"{where}: parameter {param!r} takes a function, got {function!r}")


def by_type(where: str, named: Any, materialized: Any) -> tuple[str | None, Materialized | None]:
    """Kafka's overloads: ``named`` and ``materialized`` as given in either position.

    ``count(Materialized.as_("store"))`` and ``count(Named.as_("n"))`` both mean what they say,
    as Java picks the overload by type; anything else is a TypeError naming the parameter.
    """
    found_name: str | None = None
    found_materialized: Materialized | None = None
    for param, value in (("named", named), ("materialized", materialized)):
        if value is None:
            continue
        if isinstance(value, Materialized) and found_materialized is None:
            found_materialized = value
        elif isinstance(value, Named | str) and found_name is None:
            found_name = name_of(value)
        else:
            raise TypeError(
                f"{where}: parameter {param!r} takes a Named (or str) or a Materialized, "
                f"got {type(value).__name__}: {value!r}"
            )
    return found_name, found_materialized
