"""Metered layer of a key-value stack: objects in, bytes below (Kafka Streams' ``MeteredKeyValueStore``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from platform_streams.state.api import KeyValueStore
from platform_streams.state.wrappers.metered import MeteredStore

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde

__all__ = ["MeteredKeyValueStore"]


class MeteredKeyValueStore(MeteredStore, KeyValueStore[Any, Any]):
    """The store a processor gets for a key-value store."""

    wrapped: KeyValueStore[bytes, bytes]

    def get(self, key: Any) -> Any:
        raw_key = key if type(key) is bytes and self._bytes_keys else self._serialize_key(key)
        if self._hook is None:
            raw = self.wrapped.get(raw_key)
        else:
            start = perf_counter_ns()
            raw = self.wrapped.get(raw_key)
            self._record("get", start)
        return self._deserialize_value(raw) if raw is not None else None

    def put(self, key: Any, value: Any) -> None:
        raw_key = key if type(key) is bytes and self._bytes_keys else self._serialize_key(key)
        raw_value = self._serialize_value(value)
        if self._hook is None and self._forward is None:
            self.wrapped.put(raw_key, raw_value)
            return
        start = perf_counter_ns()
        self._put(key, value, raw_key, raw_value)
        self._record("put", start)

    def _put(self, key: Any, value: Any, raw_key: bytes, raw_value: bytes | None) -> None:
        forward = self._forward
        if forward is None:
            self.wrapped.put(raw_key, raw_value)
            return
        send_old = self._send_old_values
        raw_old = self.wrapped.get(raw_key) if (send_old or raw_value is None) else None
        self.wrapped.put(raw_key, raw_value)
        if raw_value is not None or raw_old is not None:
            old = self.value_serde.deserialize(raw_old) if (send_old and raw_old is not None) else None
            forward(key, value if raw_value is not None else None, old, self._timestamp())

    def put_if_absent(self, key: Any, value: Any) -> Any:
        raw_key = self._serialize_key(key)
        raw_value = self.value_serde.serialize(value)
        start = perf_counter_ns()
        if raw_value is None:  # putting "nothing" if absent changes nothing
            raw_old = self.wrapped.get(raw_key)
        else:
            raw_old = self.wrapped.put_if_absent(raw_key, raw_value)
            if raw_old is None and self._forward is not None:
                self._forward(key, value, None, self._timestamp())
        self._record("put_if_absent", start)
        return self.value_serde.deserialize(raw_old) if raw_old is not None else None

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: Any) -> Any:
        raw_key = self._serialize_key(key)
        start = perf_counter_ns()
        raw_old = self.wrapped.delete(raw_key)
        old = self.value_serde.deserialize(raw_old) if raw_old is not None else None
        if self._forward is not None and raw_old is not None:
            self._forward(key, None, old if self._send_old_values else None, self._timestamp())
        self._record("delete", start)
        return old

    def _objects(self, items: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        deserialize_key = self.key_serde.deserialize
        deserialize_value = self.value_serde.deserialize
        for raw_key, raw_value in items:
            yield deserialize_key(raw_key), deserialize_value(raw_value)

    def _bound(self, key: Any) -> bytes | None:
        return None if key is None else self._serialize_key(key)

    def range(self, key_from: Any, key_to: Any) -> Iterator[tuple[Any, Any]]:
        return self._objects(self.wrapped.range(self._bound(key_from), self._bound(key_to)))

    def reverse_range(self, key_from: Any, key_to: Any) -> Iterator[tuple[Any, Any]]:
        return self._objects(self.wrapped.reverse_range(self._bound(key_from), self._bound(key_to)))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._objects(self.wrapped.all())

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        return self._objects(self.wrapped.reverse_all())

    def prefix_scan(self, prefix: Any, prefix_serde: Serde | None = None) -> Iterator[tuple[Any, Any]]:
        raw = (prefix_serde or self.key_serde).serialize(prefix)
        if raw is None:
            raise ValueError(f"store {self.name}: prefix cannot be None")
        return self._objects(self.wrapped.prefix_scan(raw))

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()
