"""The processor behind ``KStream.print`` (Kafka Streams' ``KStreamPrint`` + ``PrintForeachAction``).

Each record becomes one line ``[label]: <mapper(key, value)>``, flushed at once so a
console or a tailed file shows records as they are processed. Java renders a null as
``null``; so does this (the default mapper is ``"%s, %s" % (key, value)`` in Java's terms).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.state.windowed import Windowed

__all__ = ["PrintFile", "PrintProcessor", "default_key_value_mapper", "java_str"]


def java_str(value: Any) -> str:
    """``String.valueOf``: None is ``null``, a windowed key Kafka's ``[key@start/end]``,
    everything else its ``str``."""
    if value is None:
        return "null"
    if isinstance(value, Windowed):
        return f"[{java_str(value.key)}@{value.window.start_ms}/{value.window.end_ms}]"
    return str(value)


def default_key_value_mapper(key: Any, value: Any) -> str:
    """Kafka's default: ``String.format("%s, %s", key, value)``."""
    return f"{java_str(key)}, {java_str(value)}"


class PrintFile:
    """The file all tasks' printers of one ``Printed.to_file`` share.

    Opened (truncated) when the ``Printed`` is made, so a bad path fails at build time; closed
    when the last printer using it closes, and reopened for appending if printers are made
    again later (a task re-created after a rebalance), so no handle leaks and no line is lost.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._out: TextIO | None = open(path, "w", encoding="utf-8")  # noqa: SIM115 - see release
        self._users = 0

    def acquire(self) -> TextIO:
        if self._out is None:
            self._out = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - see release
        self._users += 1
        return self._out

    def release(self) -> None:
        self._users -= 1
        if self._out is not None and self._users <= 0:
            self._out.close()
            self._out = None


class PrintProcessor(NodeProcessor):
    """Writes ``[label]: mapped`` per record to stdout (``file`` None) or the shared file."""

    def __init__(self, file: PrintFile | None, mapper: Callable[[Any, Any], Any], label: str) -> None:
        self.file = file
        self.out: TextIO = sys.stdout if file is None else file.acquire()
        self.mapper = mapper
        self.label = label

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        self.out.write(f"[{self.label}]: {java_str(self.mapper(key, value))}\n")
        self.out.flush()

    def close(self) -> None:
        if self.file is None:
            self.out.flush()
        else:
            self.file.release()
