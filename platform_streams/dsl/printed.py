"""``Printed``: where and how ``KStream.print`` writes records (Kafka Streams' ``Printed``).

``Printed.to_sysout()`` writes to standard output, ``Printed.to_file(path)`` to a file that is
opened (and truncated) when the ``Printed`` is made, as Kafka does: a path that cannot be
written fails at build time with a :class:`TopologyError`, not at the first record. Each line is
``[label]: key, value``; the label defaults to the name of the printed stream's node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from platform_streams.dsl.internals.print_processor import (
    PrintFile,
    PrintProcessor,
    default_key_value_mapper,
)
from platform_streams.errors import TopologyError

__all__ = ["Printed"]


@dataclass(frozen=True)
class Printed:
    """Options of ``KStream.print``: the output, a label, a key-value mapper and a node name."""

    file: PrintFile | None
    label: str | None = None
    mapper: Callable[[Any, Any], Any] = default_key_value_mapper
    name: str | None = None

    @classmethod
    def to_sysout(cls) -> Printed:
        """Print to standard output (the current ``sys.stdout`` when the processor is made)."""
        return cls(None)

    @classmethod
    def to_file(cls, file_path: str) -> Printed:
        """Print to ``file_path`` (UTF-8, truncated now, closed when the last printer closes)."""
        if file_path is None:
            raise TypeError("filePath can't be null")
        if not str(file_path).strip():
            raise TopologyError("filePath can't be an empty string")
        try:
            return cls(PrintFile(file_path))
        except OSError as e:
            raise TopologyError(f"Unable to write stream to file at [{file_path}] {e}") from e

    def with_label(self, label: str) -> Printed:
        """Print ``[label]: ...`` instead of the stream's node name."""
        if label is None:
            raise TypeError("label can't be null")
        return replace(self, label=label)

    def with_key_value_mapper(self, mapper: Callable[[Any, Any], Any]) -> Printed:
        """Print ``mapper(key, value)`` instead of ``key, value``."""
        if mapper is None:
            raise TypeError("mapper can't be null")
        return replace(self, mapper=mapper)

    def with_name(self, name: str) -> Printed:
        """Name the printer node (else ``KSTREAM-PRINTER-<index>``)."""
        return replace(self, name=name)

    def build(self, processor_name: str) -> Callable[[], PrintProcessor]:
        """The processor supplier (Kafka's ``PrintedInternal.build``); ``processor_name`` is the
        default label."""
        label = self.label if self.label is not None else processor_name
        file, mapper = self.file, self.mapper
        return lambda: PrintProcessor(file, mapper, label)
