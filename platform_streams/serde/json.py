"""JSON serde backed by orjson, the fastest JSON codec available to CPython.

orjson encodes straight to ``bytes`` (no ``str`` round trip) and natively handles
dataclasses, datetimes, UUIDs and numpy arrays, so most application values need no
custom ``default`` hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde.base import Serde

__all__ = ["Json"]

_dumps = orjson.dumps
_loads = orjson.loads


class Json(Serde):
    """Any JSON-compatible value as UTF-8 JSON.

    ``sort_keys`` makes the encoding canonical, which matters when the serialized value
    is used as a key (grouping, joins, store lookups): two equal dicts must produce equal
    bytes or they land in different partitions. ``option`` passes extra ``orjson.OPT_*``
    flags and ``default`` handles types orjson does not know.
    """

    name = "json"
    __slots__ = ("_default", "_option", "default", "option", "sort_keys")

    def __init__(
        self,
        *,
        sort_keys: bool = False,
        option: int = 0,
        default: Callable[[Any], Any] | None = None,
    ) -> None:
        self.sort_keys = sort_keys
        self.option = option
        self.default = default
        self._option = option | (orjson.OPT_SORT_KEYS if sort_keys else 0)
        self._default = default

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            return _dumps(obj, default=self._default, option=self._option)
        except orjson.JSONEncodeError as exc:
            raise SerializationError(f"Json serde cannot encode {type(obj).__name__}: {exc}") from exc

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return _loads(data)
        except orjson.JSONDecodeError as exc:
            raise DeserializationError(f"Json serde: invalid JSON: {exc}") from exc

    def fast_deserializer(self) -> Callable[[bytes], Any] | None:
        """``orjson.loads`` itself: decoding takes no options, so it is ``deserialize`` minus
        the call. None for a subclass that decodes in its own way (overrides ``deserialize``)."""
        return _loads if type(self).deserialize is Json.deserialize else None

    def fast_serializer(self) -> Callable[[Any], bytes] | None:
        """``orjson.dumps`` itself when this serde adds no options and no ``default``. None for a
        subclass that encodes in its own way (overrides ``serialize``)."""
        plain = self._option == 0 and self._default is None and type(self).serialize is Json.serialize
        return _dumps if plain else None

    def _params(self) -> tuple[Any, ...]:
        return (self.sort_keys, self.option, self.default)

    def __repr__(self) -> str:
        args = []
        if self.sort_keys:
            args.append("sort_keys=True")
        if self.option:
            args.append(f"option={self.option}")
        if self.default is not None:
            args.append(f"default={self.default!r}")
        return f"Json({', '.join(args)})"
