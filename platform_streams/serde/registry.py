"""Resolve serde settings from config (``default.key.serde`` and friends) to instances.

Config files written for Java Kafka Streams name serdes by class
(``org.apache.kafka.common.serialization.Serdes$StringSerde``); Python users prefer
short names (``"string"``) or an import path for their own serde (``"pkg.mod:MySerde"``).
Accepting all three lets a Java ``streams.properties`` be reused as-is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from platform_streams.serde.base import Serde
from platform_streams.serde.json import Json
from platform_streams.serde.primitive import (
    UUID,
    Boolean,
    Bytes,
    Double,
    Float,
    Integer,
    Long,
    Short,
    String,
    Void,
)

__all__ = ["serde_from_name"]

# Short names, all lower-case; lookups are case-insensitive.
_SHORT: dict[str, Callable[[], Serde]] = {
    "bytes": Bytes,
    "bytearray": Bytes,
    "byte_array": Bytes,
    "bytebuffer": Bytes,
    "string": String,
    "str": String,
    "short": Short,
    "integer": Integer,
    "int": Integer,
    "long": Long,
    "float": Float,
    "double": Double,
    "boolean": Boolean,
    "bool": Boolean,
    "uuid": UUID,
    "void": Void,
    "none": Void,
    "json": Json,
}

# Java ``Serdes$XxxSerde`` simple names, lower-cased.
_JAVA: dict[str, Callable[[], Serde]] = {
    "bytearrayserde": Bytes,
    "bytesserde": Bytes,
    "bytebufferserde": Bytes,
    "stringserde": String,
    "shortserde": Short,
    "integerserde": Integer,
    "longserde": Long,
    "floatserde": Float,
    "doubleserde": Double,
    "booleanserde": Boolean,
    "uuidserde": UUID,
    "voidserde": Void,
}

_JAVA_PACKAGE = "org.apache.kafka.common.serialization."


def _java_simple_name(spec: str) -> str | None:
    """``...serialization.Serdes$LongSerde`` (or ``Serdes.LongSerde``) -> ``longserde``."""
    lowered = spec.lower()
    if lowered.startswith(_JAVA_PACKAGE):
        lowered = lowered[len(_JAVA_PACKAGE) :]
    for prefix in ("serdes$", "serdes."):
        if lowered.startswith(prefix):
            return lowered[len(prefix) :]
    return None


def _from_import_path(spec: str) -> Serde:
    """Import ``module.path:Attr``; a Serde class is instantiated, a Serde instance returned."""
    module_name, _, attr_path = spec.partition(":")
    try:
        target: object = importlib.import_module(module_name.strip())
        for part in attr_path.strip().split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import serde {spec!r}: {exc}") from exc
    if isinstance(target, Serde):
        return target
    if isinstance(target, type) and issubclass(target, Serde):
        return target()
    raise ValueError(f"serde {spec!r} resolves to {target!r}, which is not a Serde class or instance")


def serde_from_name(spec: str | Serde | type[Serde]) -> Serde:
    """Turn a config value into a :class:`Serde` instance.

    Accepts an instance (returned as-is), a Serde subclass (instantiated with no
    arguments), a case-insensitive short name (``"string"``, ``"Long"``, ``"json"``), a
    Java ``Serdes$...Serde`` class name, or a ``module.path:ClassName`` import path.
    Called once per topology build, never per record.
    """
    if isinstance(spec, Serde):
        return spec
    if isinstance(spec, type) and issubclass(spec, Serde):
        return spec()
    if not isinstance(spec, str):
        raise ValueError(f"serde spec must be a name, a Serde or a Serde class, got {spec!r}")
    text = spec.strip()
    if ":" in text:
        return _from_import_path(text)
    factory = _SHORT.get(text.lower())
    if factory is None:
        simple = _java_simple_name(text)
        if simple is not None:
            factory = _JAVA.get(simple)
    if factory is None:
        raise ValueError(
            f"unknown serde {spec!r}; valid short names: {', '.join(sorted(_SHORT))}; "
            f"or a Java class such as {_JAVA_PACKAGE}Serdes$StringSerde, "
            "or an import path 'module.path:ClassName'"
        )
    return factory()
