"""Answer one typed query from one store instance (one partition).

Dispatch is by the store's interface (key-value, window, session) and the query's type;
a pairing the store cannot answer is ``UNKNOWN_QUERY_TYPE``, an exception is
``STORE_EXCEPTION``. Multi-row results are materialized into lists while the caller
holds the worker's store guard: store iterators read caches that the worker thread
mutates, so they must not outlive the guarded section. ``limit`` caps the rows of a scan
(the HTTP API always passes one; the Python API none).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from platform_streams.query import queries
from platform_streams.query.queries import Query
from platform_streams.query.results import FailureReason, QueryResult
from platform_streams.state.api import KeyValueStore, SessionStore, WindowStore
from platform_streams.state.versioned import MeteredVersionedKeyValueStore
from platform_streams.state.windowed import TimeWindow, Windowed

__all__ = ["execute_query", "store_kind"]

#: The latest window start a store can hold (``fetch_between`` upper bound for "all").
_MAX_TIME = 2**63 - 1
_MIN_TIME = -(2**63)


def _versioned(store: Any) -> MeteredVersionedKeyValueStore | None:
    """The versioned store of a versioned KTable's or a Processor API versioned store."""
    store = getattr(store, "versioned_store", store)
    return store if isinstance(store, MeteredVersionedKeyValueStore) else None


def store_kind(store: Any) -> str:
    """``key_value`` / ``window`` / ``session`` / ``unknown``: what a store can be asked."""
    if isinstance(store, KeyValueStore):
        return "key_value"
    if isinstance(store, WindowStore):
        return "window"
    if isinstance(store, SessionStore):
        return "session"
    if _versioned(store) is not None:
        return "versioned"
    return "unknown"


def execute_query(store: Any, query: Query | None, *, limit: int | None = None) -> QueryResult:
    """Run ``query`` on ``store``; the caller adds the position and checks bounds."""
    try:
        answered = _dispatch(store, query, limit)
    except Exception as exc:
        return QueryResult.for_failure(
            FailureReason.STORE_EXCEPTION, f"store {getattr(store, 'name', '?')}: {type(exc).__name__}: {exc}"
        )
    if answered is _UNKNOWN:
        return QueryResult.for_failure(
            FailureReason.UNKNOWN_QUERY_TYPE,
            f"a {store_kind(store)} store cannot answer {type(query).__name__}",
        )
    return QueryResult.for_result(answered)


_UNKNOWN = object()


def _dispatch(store: Any, query: Query | None, limit: int | None) -> Any:
    versioned = _versioned(store)
    if versioned is not None:
        # Kafka's versioned stores answer only the versioned queries (KIP-960/968)
        if isinstance(query, queries.VersionedKeyQuery):
            return versioned.get(query.key, query.as_of_timestamp, with_valid_to=True)
        if isinstance(query, queries.MultiVersionedKeyQuery):
            time_from = _MIN_TIME if query.from_time is None else query.from_time
            time_to = _MAX_TIME if query.to_time is None else query.to_time
            versions = versioned.versions(query.key, time_from, time_to, ascending=query.ascending)
            return _take(iter(versions), limit)
    elif isinstance(store, KeyValueStore):
        if isinstance(query, queries.KeyQuery):
            return store.get(query.key)
        if isinstance(query, queries.RangeQuery):
            return _take(_kv_range(store, query), limit)
    elif isinstance(store, WindowStore):
        if isinstance(query, queries.WindowKeyQuery):
            return _take(store.fetch_between(query.key, query.time_from_ms, query.time_to_ms), limit)
        if isinstance(query, queries.WindowRangeQuery):
            if query.key is not None:
                size = store.window_size_ms
                rows = (
                    (Windowed(query.key, TimeWindow(start, start + size)), value)
                    for start, value in store.fetch_between(query.key, 0, _MAX_TIME)
                )
                return _take(rows, limit)
            if query.time_from_ms is not None and query.time_to_ms is not None:
                return _take(store.fetch_all(query.time_from_ms, query.time_to_ms), limit)
    elif (
        isinstance(store, SessionStore)
        and isinstance(query, queries.WindowRangeQuery)
        and query.key is not None
    ):
        return _take(store.fetch(query.key), limit)
    return _UNKNOWN


def _kv_range(store: KeyValueStore[Any, Any], query: queries.RangeQuery) -> Iterator[tuple[Any, Any]]:
    if query.prefix is not None:
        rows = store.prefix_scan(query.prefix)
        return reversed(list(rows)) if query.descending else rows
    if query.descending:
        return store.reverse_range(query.lower, query.upper)
    return store.range(query.lower, query.upper)


def _take(rows: Iterator[Any], limit: int | None) -> list[Any]:
    return list(rows) if limit is None else list(itertools.islice(rows, limit))
