"""Kafka Streams' generated names: ``<PREFIX><10-digit index>`` from one counter per builder."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class NameGenerator:
    """Hands out node and store names in Kafka Streams' style and order."""

    def __init__(self) -> None:
        self._index = 0

    def next_index(self) -> int:
        index = self._index
        self._index += 1
        return index

    def name(self, prefix: str, given: str | None = None) -> str:
        """``given`` if the user named the operator, else e.g. ``KSTREAM-FILTER-0000000001``.

        An index is consumed either way, as Kafka Streams' ``NamedInternal.orElseGenerateWithPrefix``
        does, so every later generated name (and the store, changelog and repartition topic
        names derived from them) equals the Java topology's built with the same calls.
        """
        generated = f"{prefix}{self.next_index():010d}"
        return generated if given is None else given

    def repartition_names(self) -> tuple[str, str, str]:
        """The generated (sink, filter, source) names of a repartition, drawn in Kafka's order
        (``createRepartitionedSource`` draws them even when the nodes are named or reused)."""
        return self.name("KSTREAM-SINK-"), self.name("KSTREAM-FILTER-"), self.name("KSTREAM-SOURCE-")

    def suffixed(self, given: str | None, suffix: str, prefix: str) -> str:
        """``given + suffix`` if the user named the operator, else a generated name (an index is
        consumed either way: Kafka Streams' ``NamedInternal.suffixWithOrElseGet``)."""
        generated = f"{prefix}{self.next_index():010d}"
        return generated if given is None else given + suffix


def takes_key(fn: Callable[..., Any]) -> bool:
    """True if ``fn`` wants (key, value) rather than (value): two required positional params.

    Kafka Streams tells ``ValueMapper`` from ``ValueMapperWithKey`` by type; Python
    has one callable type, so the DSL looks at the signature once, at build time.
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(positional) >= 2
