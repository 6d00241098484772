"""Metered layers of window and session stacks (Kafka Streams' ``MeteredWindowStore`` /
``MeteredSessionStore``): objects in, bytes below; ``Windowed`` keys are rebuilt around
the deserialized key so the window object itself is shared, not copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from platform_streams.state.api import NO_KEY_RANGE, SessionStore, WindowStore
from platform_streams.state.windowed import TimeWindow, Windowed
from platform_streams.state.wrappers.base import DelegatedRetention, DelegatedWindowShape
from platform_streams.state.wrappers.metered import MeteredStore

if TYPE_CHECKING:
    pass

__all__ = ["MeteredSessionStore", "MeteredWindowStore"]


class _MeteredWindowed(MeteredStore):
    def _deserialize_flushed_key(self, key: Any) -> Any:
        return Windowed(self.key_serde.deserialize(key.key), key.window)

    def _windowed_objects(
        self, items: Iterator[tuple[Windowed[bytes], bytes]]
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        deserialize_key = self.key_serde.deserialize
        deserialize_value = self.value_serde.deserialize
        for windowed, raw_value in items:
            yield Windowed(deserialize_key(windowed.key), windowed.window), deserialize_value(raw_value)


class MeteredWindowStore(_MeteredWindowed, DelegatedWindowShape, WindowStore[Any, Any]):
    """The store a processor gets for a window store."""

    wrapped: WindowStore[bytes, bytes]

    def put(self, key: Any, value: Any, window_start_ms: int) -> None:
        raw_key = key if type(key) is bytes and self._bytes_keys else self._serialize_key(key)
        raw_value = self._serialize_value(value)
        if self._hook is None and self._forward is None:
            self.wrapped.put(raw_key, raw_value, window_start_ms)
            return
        start = perf_counter_ns()
        forward = self._forward
        if forward is None:
            self.wrapped.put(raw_key, raw_value, window_start_ms)
        else:
            send_old = self._send_old_values
            need_old = (send_old or raw_value is None) and not self.wrapped.retain_duplicates
            raw_old = self.wrapped.fetch_at(raw_key, window_start_ms) if need_old else None
            self.wrapped.put(raw_key, raw_value, window_start_ms)
            if raw_value is not None or raw_old is not None:
                old = self.value_serde.deserialize(raw_old) if (send_old and raw_old is not None) else None
                window = TimeWindow(window_start_ms, window_start_ms + self.wrapped.window_size_ms)
                forward(
                    Windowed(key, window), value if raw_value is not None else None, old, self._timestamp()
                )
        self._record("put", start)

    def fetch_at(self, key: Any, window_start_ms: int) -> Any:
        raw_key = key if type(key) is bytes and self._bytes_keys else self._serialize_key(key)
        if self._hook is None:
            raw = self.wrapped.fetch_at(raw_key, window_start_ms)
        else:
            start = perf_counter_ns()
            raw = self.wrapped.fetch_at(raw_key, window_start_ms)
            self._record("fetch", start)
        return self._deserialize_value(raw) if raw is not None else None

    def fetch_between(
        self, key: Any, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[int, Any]]:
        items = self.wrapped.fetch_between(
            self._serialize_key(key), time_from_ms, time_to_ms, backward=backward
        )
        deserialize = self.value_serde.deserialize
        return ((start, deserialize(raw)) for start, raw in items)

    def fetch_range(
        self,
        key_from: Any,
        key_to: Any,
        time_from_ms: int,
        time_to_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        raw_from = None if key_from is None else self._serialize_key(key_from)
        raw_to = None if key_to is None else self._serialize_key(key_to)
        items = self.wrapped.fetch_range(raw_from, raw_to, time_from_ms, time_to_ms, backward=backward)
        return self._windowed_objects(items)

    def fetch_all(
        self, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        return self._windowed_objects(self.wrapped.fetch_all(time_from_ms, time_to_ms, backward=backward))

    def all(self, *, backward: bool = False) -> Iterator[tuple[Windowed[Any], Any]]:
        return self._windowed_objects(self.wrapped.all(backward=backward))


class MeteredSessionStore(_MeteredWindowed, DelegatedRetention, SessionStore[Any, Any]):
    """The store a processor gets for a session store."""

    wrapped: SessionStore[bytes, bytes]

    def put(self, session_key: Windowed[Any], aggregate: Any) -> None:
        raw_key = self._serialize_key(session_key.key)
        raw_value = self.value_serde.serialize(aggregate)
        raw_session = Windowed(raw_key, session_key.window)
        if self._hook is None and self._forward is None:
            self.wrapped.put(raw_session, raw_value)
            return
        start = perf_counter_ns()
        forward = self._forward
        if forward is None:
            self.wrapped.put(raw_session, raw_value)
        else:
            send_old = self._send_old_values
            window = session_key.window
            raw_old = (
                self.wrapped.fetch_session(raw_key, window.start_ms, window.end_ms)
                if (send_old or raw_value is None)
                else None
            )
            self.wrapped.put(raw_session, raw_value)
            if raw_value is not None or raw_old is not None:
                old = self.value_serde.deserialize(raw_old) if (send_old and raw_old is not None) else None
                forward(session_key, aggregate if raw_value is not None else None, old, self._timestamp())
        self._record("put", start)

    def remove(self, session_key: Windowed[Any]) -> None:
        self.put(session_key, None)

    def find_sessions(
        self,
        key: Any,
        earliest_session_end_ms: Any,
        latest_session_start_ms: int,
        range_latest_start_ms: int | None = None,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """``find_sessions(key, earliest_end, latest_start)``, or with four arguments Kafka's
        ``findSessions(keyFrom, keyTo, earliestSessionEndTime, latestSessionStartTime)``."""
        if range_latest_start_ms is not None:
            return self.find_sessions_range(
                key,
                earliest_session_end_ms,
                latest_session_start_ms,
                range_latest_start_ms,
                backward=backward,
            )
        items = self.wrapped.find_sessions(
            self._serialize_key(key), earliest_session_end_ms, latest_session_start_ms, backward=backward
        )
        return self._with_key(key, items)

    def _with_key(
        self, key: Any, items: Iterator[tuple[Windowed[bytes], bytes]]
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """Results for one key: reuse the caller's key object instead of deserializing it again."""
        deserialize = self.value_serde.deserialize
        return ((Windowed(key, windowed.window), deserialize(raw)) for windowed, raw in items)

    def fetch_session(self, key: Any, session_start_ms: int, session_end_ms: int) -> Any:
        raw = self.wrapped.fetch_session(self._serialize_key(key), session_start_ms, session_end_ms)
        return self.value_serde.deserialize(raw) if raw is not None else None

    def fetch(
        self, key: Any, key_to: Any = NO_KEY_RANGE, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """Sessions of ``key``, or with ``key_to`` of the keys in ``[key, key_to]`` (Kafka's
        ``fetch(keyFrom, keyTo)``; a None bound is unbounded)."""
        if key_to is not NO_KEY_RANGE:
            return self.fetch_range(key, key_to, backward=backward)
        return self._with_key(key, self.wrapped.fetch(self._serialize_key(key), backward=backward))

    def find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        raw_from = None if key_from is None else self._serialize_key(key_from)
        raw_to = None if key_to is None else self._serialize_key(key_to)
        return self._windowed_objects(
            self.wrapped.find_sessions_range(
                raw_from, raw_to, earliest_session_end_ms, latest_session_start_ms, backward=backward
            )
        )
