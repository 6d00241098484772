"""Settings that name a class or a callable by a dotted path, as Kafka's class-valued settings
(``rocksdb.config.setter``, ``processor.wrapper.class``) name a class.

A leaf module of its own: ``config`` and ``processor`` both use it, and neither may import
the other's package for it (tests/unit/test_package_shape.py lists the cycles)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["import_dotted"]


def import_dotted(value: str, expected: str) -> Any:
    """The object ``package.module.name`` (or ``package.module:name``) names, imported now so
    that a wrong name fails when the config is made; ``expected`` says what else the setting
    may be, for the one-line error."""
    path = value.strip()
    module_name, sep, attr = path.replace(":", ".").rpartition(".")
    if not sep or not module_name or not attr:
        raise ValueError(f"must be {expected} or a dotted path 'package.module.name', got {value!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {path!r}: {exc}") from exc
