"""The typed queries of interactive queries v2 (Kafka Streams' ``org.apache.kafka.streams.query``).

A query says *what* to read; :mod:`platform_streams.query.execution` decides how each kind
of store answers it. Keys and bounds are Python objects, serialized with the store's own
key serde, exactly as a processor would pass them to the store.

* :class:`KeyQuery` -- one key of a key-value store.
* :class:`RangeQuery` -- a key range (both bounds inclusive, either may be open), every
  key (``with_no_bounds``), or every key whose *serialized* form starts with a prefix
  (``with_prefix``). Results are ordered by serialized key within a partition.
* :class:`WindowKeyQuery` -- the windows of one key whose start lies in a time range.
* :class:`WindowRangeQuery` -- all windows of one key (``with_key``) or every key's
  windows starting in a time range (``with_window_start_range``).
* :class:`VersionedKeyQuery` -- one key of a versioned store, latest or ``as_of`` a time
  (KIP-960): a :class:`~platform_streams.state.versioned.VersionedRecord` or None.
* :class:`MultiVersionedKeyQuery` -- every version of one key valid in a time range
  (KIP-968): a list of ``VersionedRecord``, newest first unless ascending is asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "KeyQuery",
    "MultiVersionedKeyQuery",
    "Query",
    "RangeQuery",
    "VersionedKeyQuery",
    "WindowKeyQuery",
    "WindowRangeQuery",
]


def _required(value: Any, message: str) -> Any:
    """``value``, or the ``ValueError`` Kafka's query factories throw for a null argument."""
    if value is None:
        raise ValueError(message)
    return value


class Query:
    """Base of every query type (an unknown subclass gets ``UNKNOWN_QUERY_TYPE``)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class KeyQuery(Query):
    """The value of one key (None result: the key is absent)."""

    key: Any

    @classmethod
    def with_key(cls, key: Any) -> KeyQuery:
        return cls(_required(key, "KeyQuery needs a key"))


@dataclass(frozen=True, slots=True)
class RangeQuery(Query):
    """Entries with ``lower <= key <= upper`` (None: open), or with a serialized-key ``prefix``."""

    lower: Any = None
    upper: Any = None
    prefix: Any = None
    descending: bool = False

    @classmethod
    def with_range(cls, lower: Any, upper: Any) -> RangeQuery:
        return cls(lower=lower, upper=upper)

    @classmethod
    def with_lower_bound(cls, lower: Any) -> RangeQuery:
        return cls(lower=lower)

    @classmethod
    def with_upper_bound(cls, upper: Any) -> RangeQuery:
        return cls(upper=upper)

    @classmethod
    def with_no_bounds(cls) -> RangeQuery:
        return cls()

    @classmethod
    def with_prefix(cls, prefix: Any) -> RangeQuery:
        return cls(prefix=_required(prefix, "a prefix RangeQuery needs a prefix"))

    def with_descending_keys(self) -> RangeQuery:
        return RangeQuery(self.lower, self.upper, self.prefix, True)


@dataclass(frozen=True, slots=True)
class WindowKeyQuery(Query):
    """Windows of ``key`` whose start is in ``[time_from_ms, time_to_ms]``: ``[(start, value)]``."""

    key: Any
    time_from_ms: int
    time_to_ms: int

    @classmethod
    def with_key_and_window_start_range(cls, key: Any, time_from_ms: int, time_to_ms: int) -> WindowKeyQuery:
        return cls(_required(key, "WindowKeyQuery needs a key"), int(time_from_ms), int(time_to_ms))


@dataclass(frozen=True, slots=True)
class WindowRangeQuery(Query):
    """All windows of one key, or all keys' windows starting in a time range: ``[(Windowed, value)]``."""

    key: Any = None
    time_from_ms: int | None = None
    time_to_ms: int | None = None

    @classmethod
    def with_key(cls, key: Any) -> WindowRangeQuery:
        return cls(key=_required(key, "WindowRangeQuery.with_key needs a key"))

    @classmethod
    def with_window_start_range(cls, time_from_ms: int, time_to_ms: int) -> WindowRangeQuery:
        return cls(time_from_ms=int(time_from_ms), time_to_ms=int(time_to_ms))


@dataclass(frozen=True, slots=True)
class VersionedKeyQuery(Query):
    """Kafka's ``VersionedKeyQuery``: the latest version of ``key``, or the one valid ``as_of``."""

    key: Any
    as_of_timestamp: int | None = None

    @classmethod
    def with_key(cls, key: Any) -> VersionedKeyQuery:
        return cls(_required(key, "key cannot be null."))

    def as_of(self, timestamp: int) -> VersionedKeyQuery:
        return VersionedKeyQuery(self.key, _required(timestamp, "asOf timestamp cannot be null."))


@dataclass(frozen=True, slots=True)
class MultiVersionedKeyQuery(Query):
    """Kafka's ``MultiVersionedKeyQuery``: versions of ``key`` valid at some time in
    ``[from_time, to_time]`` (None: unbounded), newest first unless ``ascending``."""

    key: Any
    from_time: int | None = None
    to_time: int | None = None
    ascending: bool = False

    @classmethod
    def with_key(cls, key: Any) -> MultiVersionedKeyQuery:
        return cls(_required(key, "key cannot be null."))

    def from_time_ms(self, from_time: int) -> MultiVersionedKeyQuery:
        return MultiVersionedKeyQuery(self.key, from_time, self.to_time, self.ascending)

    def to_time_ms(self, to_time: int) -> MultiVersionedKeyQuery:
        return MultiVersionedKeyQuery(self.key, self.from_time, to_time, self.ascending)

    def with_ascending_timestamps(self) -> MultiVersionedKeyQuery:
        return MultiVersionedKeyQuery(self.key, self.from_time, self.to_time, True)

    def with_descending_timestamps(self) -> MultiVersionedKeyQuery:
        return MultiVersionedKeyQuery(self.key, self.from_time, self.to_time, False)
