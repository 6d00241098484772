"""The marker on a timestamped key-value store's changelog records, and what reads it.

A timestamped store logs its own bytes, ``timestamp (8) + value``, where Kafka's
``ChangeLoggingTimestampedKeyValueBytesStore`` logs the plain value (the timestamp is the
record's). Restoring a timestamped store needs the bytes as they are; restoring a
versioned store from the same changelog -- Kafka's documented manual upgrade from a
key-value store to a versioned one (KIP-889) -- needs the plain value. Older changelogs
carry no marker, and an 8-byte prefix cannot be told from value bytes, so each record of a
timestamped store says so in a header: a versioned store's restore drops the prefix of the
records that carry it (:func:`versioned_values`) and keeps every other record as it is. The
bytes stay the same, so any reader that ignores the header reads them as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TIMESTAMPED_VALUE_HEADER", "TIMESTAMPED_VALUE_MARK", "versioned_values"]

#: the header on a timestamped key-value store's changelog record: its value is
#: ``timestamp (8) + value``
TIMESTAMPED_VALUE_HEADER = "__ps_tsv"
#: the header as a changelog record carries it
TIMESTAMPED_VALUE_MARK = (TIMESTAMPED_VALUE_HEADER, b"1")


def versioned_values(messages: Sequence[Any], values: list[bytes | None]) -> None:
    """Drop the timestamp prefix of the values (parallel to ``messages``, consumed changelog
    records) whose record carries :data:`TIMESTAMPED_VALUE_HEADER`: what a versioned store
    restores from a timestamped store's changelog (the version time is the record's)."""
    for index, message in enumerate(messages):
        value = values[index]
        if value is None:
            continue
        headers = message.headers()
        if headers and any(name == TIMESTAMPED_VALUE_HEADER for name, _ in headers):
            values[index] = value[8:]
