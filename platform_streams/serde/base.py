"""The :class:`Serde` contract shared by every key/value format.

A serde is a single object doing both directions (unlike Java's separate
Serializer/Deserializer pair) because in a topology the two always travel together:
a source needs the deserializer, the sink and the changelog need the serializer of the
same format. ``None`` maps to ``None`` both ways so that tombstones (deletes) survive a
round trip through any format without each caller special-casing them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

__all__ = ["Serde", "WrappingSerde"]


class Serde(ABC):
    """Converts Python objects to record bytes and back; ``None`` passes through untouched.

    Implementations sit on the per-record hot path, so they should do the minimum: check
    for ``None``, run one conversion, and translate conversion failures into
    :class:`~platform_streams.errors.SerializationError` /
    :class:`~platform_streams.errors.DeserializationError` so the runtime's exception
    handlers see one exception family regardless of format.
    """

    #: Short, stable identifier used in topology ``describe()`` output and in config
    #: values; for built-in serdes :func:`serde_from_name` resolves it back to the serde.
    name: str = "serde"

    __slots__ = ()

    @abstractmethod
    def serialize(self, obj: Any) -> bytes | None:
        """Encode ``obj`` to bytes; must return ``None`` for ``None`` (a tombstone)."""

    @abstractmethod
    def deserialize(self, data: bytes | None) -> Any:
        """Decode ``data``; must return ``None`` for ``None`` (a tombstone)."""

    def fast_deserializer(self) -> Callable[[bytes], Any] | None:
        """A C-level function equal to :meth:`deserialize` on the non-None data it accepts.

        Fused source code (one call per consumed record) calls it instead of the method and,
        when it raises, calls :meth:`deserialize` on the same data, so failures are still
        reported with this serde's own error. None (the default): no such function.
        """
        return None

    def fast_serializer(self) -> Callable[[Any], bytes] | None:
        """A C-level function equal to :meth:`serialize` on the non-None objects it accepts.

        Fused sink code (one call per record sent) calls it instead of the method and, when
        it raises, calls :meth:`serialize` on the same object, so failures are still
        reported with this serde's own error. None (the default): no such function.
        """
        return None

    def for_topic(self, topic: str) -> Serde:
        """This serde as used for ``topic``; the runtime calls it with each source, sink and
        changelog topic the serde serves (Java serdes get the topic on every call). A serde
        whose bytes depend on the topic (a Schema Registry subject) returns a copy bound to
        it; all others return themselves (the default)."""
        return self

    def _params(self) -> tuple[Any, ...]:
        """Constructor arguments that distinguish two instances of the same class.

        Drives ``__eq__``/``__hash__`` so that e.g. ``serde_from_name("string") == String()``,
        which lets the topology builder compare serdes coming from config and from code.
        """
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(repr, self._params()))})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Serde)
        return self._params() == other._params()

    def __hash__(self) -> int:
        return hash((type(self), self._params()))


class WrappingSerde(Serde):
    """A serde whose layout wraps an ``inner`` serde's bytes (a changed-value pair, a
    windowed key): the inner serde is the instance's identity, so two wrappers of equal
    inner serdes are equal. Subclasses add their own parameters to :meth:`_params`."""

    __slots__ = ("inner",)

    def __init__(self, inner: Serde) -> None:
        self.inner = inner

    def _params(self) -> tuple[Any, ...]:
        return (self.inner,)
