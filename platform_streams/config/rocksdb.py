"""Parsing of the RocksDB settings of :class:`~platform_streams.config.StreamsConfig`.

Pure Python (no rocksdict): the config is validated without loading the RocksDB extension;
the backend (``state/rocksdb_options.py``) applies the values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from platform_streams.dotted_paths import import_dotted

__all__ = ["parse_byte_size", "resolve_config_setter"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "ki": 1 << 10,
    "kib": 1 << 10,
    "mi": 1 << 20,
    "mib": 1 << 20,
    "gi": 1 << 30,
    "gib": 1 << 30,
}
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)")


def parse_byte_size(value: Any) -> Any:
    """Bytes from ``268435456``, ``"256MiB"``, ``"256Mi"`` (Kubernetes), ``"1GB"``...; None stays.

    Binary units (KiB, MiB, GiB; Ki, Mi, Gi) are powers of 1024, decimal ones (kB, MB, GB; K,
    M, G) powers of 1000, as Kubernetes reads a container's memory limit.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _SIZE_RE.fullmatch(value.strip())
        unit = _UNITS.get(match.group(2).lower()) if match else None
        if match and unit is not None:
            return int(float(match.group(1)) * unit)
    raise ValueError(f"must be a size in bytes such as 268435456, '256MiB' or '1GiB', got {value!r}")


def resolve_config_setter(value: Any) -> Callable[..., None] | None:
    """A config setter from a callable, a class (instantiated, as Kafka does with its
    ``rocksdb.config.setter`` class) or a dotted path ``package.module.name`` naming one."""
    if value is None:
        return None
    if isinstance(value, str):
        value = import_dotted(value, "a callable")
    if isinstance(value, type):
        value = value()
    if not callable(value):
        kind = type(value).__name__
        raise ValueError(f"must be callable as setter(store_name, options, table), got {kind}")
    return value
