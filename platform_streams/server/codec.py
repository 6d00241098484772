"""Text in, JSON out: how the HTTP API reads keys from URLs and writes store values.

A key in a URL is text; the store's key serde decides how to read it: numbers for the
integer and floating-point serdes, ``true``/``false`` for booleans, a UUID, JSON for the
JSON serde (bare text is taken as a JSON string), a pydantic model from its JSON, and
the UTF-8 bytes of the text for the bytes serde. Anything that cannot be read -- or that
the serde then refuses to serialize -- is a :class:`MalformedKeyError` (HTTP 400).

Values are written as JSON: bytes as UTF-8 text when they are text (else
``{"base64": ...}``), pydantic models with ``model_dump(mode="json")``, windowed keys as
``{"key", "start_ms", "end_ms"}``, tuples as lists, anything else orjson cannot encode as
its ``str()``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import uuid
from typing import Any

import orjson

from platform_streams.serde import UUID as UUIDSerde
from platform_streams.serde import Boolean, Bytes, Double, Float, Integer, Json, Long, Pydantic, Serde, Short
from platform_streams.serde import String as StringSerde
from platform_streams.state.windowed import Window, Windowed

__all__ = ["MalformedKeyError", "dumps", "jsonable", "parse_key", "parse_number"]

_INTEGER_SERDES = (Long, Integer, Short)
_FLOAT_SERDES = (Double, Float)


class MalformedKeyError(ValueError):
    """The text cannot be a key of the store (its key serde cannot read or write it)."""


def parse_key(text: str, serde: Serde) -> Any:
    """Read ``text`` as a key for ``serde`` and check the serde can serialize it."""
    try:
        key = _read(text, serde)
        raw = serde.serialize(key)
    except MalformedKeyError:
        raise
    except Exception as exc:
        raise MalformedKeyError(f"{text!r} is not a valid {serde.name} key: {exc}") from exc
    if raw is None:
        raise MalformedKeyError(f"{text!r} is not a valid {serde.name} key (it serializes to nothing)")
    return key


def _read(text: str, serde: Serde) -> Any:
    if isinstance(serde, StringSerde):
        return text
    if isinstance(serde, _INTEGER_SERDES):
        return _strict_int(text, "key")
    if isinstance(serde, _FLOAT_SERDES):
        # Python's float() also reads "1_0", non-ASCII digits and surrounding spaces
        if not text.isascii() or "_" in text or text != text.strip():
            raise MalformedKeyError(f"{text!r} is not a number key (ASCII digits, e.g. -1.5e3)")
        return float(text)
    if isinstance(serde, Boolean):
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise MalformedKeyError(f"{text!r} is not a boolean key (true/false)")
        return lowered == "true"
    if isinstance(serde, UUIDSerde):
        return uuid.UUID(text.strip())
    if isinstance(serde, Bytes):
        return text.encode()
    if isinstance(serde, Json):
        try:
            return json.loads(text)
        except ValueError:
            return text
    if isinstance(serde, Pydantic):
        return serde.model_cls.model_validate_json(text)
    return text


_INT_RE = re.compile(r"[+-]?[0-9]+")


def _strict_int(text: str, what: str) -> int:
    """``text`` as an integer written in ASCII digits (Java's ``Long.parseLong`` syntax).

    Python's ``int()`` also reads ``"1_0"``, Arabic-Indic or other Unicode digits and
    surrounding whitespace: two different URLs would name the same key or number.
    """
    if not _INT_RE.fullmatch(text):
        raise MalformedKeyError(f"{what} must be an integer in ASCII digits, got {text!r}")
    return int(text)


def parse_number(text: str | None, what: str, low: int = -(2**63), high: int = 2**63 - 1) -> int | None:
    """An optional integer query parameter in ``[low, high]`` (default: a Java long);
    ValueError naming ``what`` when malformed or out of range."""
    if text is None or text == "":
        return None
    value = _strict_int(text, what)
    if not low <= value <= high:
        raise ValueError(f"{what} must be between {low} and {high}, got {text}")
    return value


def jsonable(value: Any) -> Any:
    """``value`` with everything orjson cannot encode converted (see the module docstring)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Windowed):
        return {"key": jsonable(value.key), "start_ms": value.window.start_ms, "end_ms": value.window.end_ms}
    if isinstance(value, Window):
        return {"start_ms": value.start_ms, "end_ms": value.end_ms}
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode()}
    if isinstance(value, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    return value


def dumps(document: Any) -> bytes:
    """JSON bytes of ``document`` (after :func:`jsonable`)."""
    return orjson.dumps(jsonable(document), default=str)
