"""Dead-letter records that fit: what is cut from one too large to be written whole.

A dead letter is the failed record plus the ``__streams.errors.*`` headers (~1 KB, more with
a long stack trace), so a record near the size limit makes a dead letter the producer
(``message.max.bytes``) or the broker (the topic's ``max.message.bytes``) refuses. Kafka
Streams then fails the thread (KIP-1034: a dead letter that cannot be sent goes to the
uncaught exception handler), and as the input is read again after a restart, so does every
restart. Here the dead letter is cut to fit instead, in this order, until it does:

1. the value is dropped;
2. the stack trace, then the error message headers are cut to no less than their first
   1,000 bytes (an exception's text may quote the whole bad value, and the stack trace
   repeats it);
3. the key is dropped, then 4. the record's own headers (those not ``__streams.errors.*``);
5. the stack trace and the message are cut further, to nothing if need be.

What was cut is named in the ``__streams.errors.payload.truncated`` header: comma-separated
``<part>=<original size in bytes>`` in the order first cut, with part ``value``,
``stacktrace``, ``message``, ``key`` or ``headers`` (all the record's own headers together), e.g.
``value=999000``. A cut value or key is null, never a prefix: replaying a dead letter must
not feed half a record back in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from platform_streams.processor.record import Headers

__all__ = ["HEADER_PAYLOAD_TRUNCATED", "DeadLetterLimit", "message_size", "record_size"]

log = logging.getLogger(__name__)

HEADER_PAYLOAD_TRUNCATED = "__streams.errors.payload.truncated"
#: room left for what the size estimate does not count: the record's varints, attributes and
#: timestamp delta, and the batch header the broker's limit includes (61 bytes in v2)
_OVERHEAD = 512
#: a header's name and value lengths (varints) and its place in the header count, at most
_PER_HEADER = 12
_ERRORS_PREFIX = "__streams.errors."
_MESSAGE = "__streams.errors.message"
_STACKTRACE = "__streams.errors.stacktrace"
#: what is kept of the stack trace and the message before the key is dropped
_ERROR_TEXT_KEPT = 1_000


def record_size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """A record's size as a broker or librdkafka counts it against a size limit, rounded up."""
    size = _OVERHEAD + len(key or b"") + len(value or b"")
    for name, header_value in headers or ():
        size += _PER_HEADER + len(name) + len(header_value or b"")
    return size


def _varint_size(n: int) -> int:
    """Bytes of ``n`` as a zigzag varint (Kafka's record lengths)."""
    zigzag = (n << 1) ^ (n >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7)


def message_size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """What librdkafka's ``produce`` compares with ``message.max.bytes`` before it queues a
    record (``rd_kafka_msg_max_wire_size``: a v2 record's largest fixed overhead, 36 bytes,
    plus key, value and the serialized headers)."""
    size = 36 + len(key or b"") + len(value or b"")
    for name, header_value in headers or ():
        raw = name.encode()
        size += _varint_size(len(raw)) + len(raw)
        size += 1 if header_value is None else _varint_size(len(header_value)) + len(header_value)
    return size


class DeadLetterLimit:
    """How large a dead letter may be (one per worker, shared by its handlers), and cutting
    a dead letter to it. :meth:`lower` learns a smaller limit from a refused dead letter."""

    def __init__(self, max_bytes: int, send: Callable[..., None] | None = None) -> None:
        self.max_bytes = max_bytes
        #: how the collector wants dead letters sent (``send``'s arguments), if not as any record
        self.send: Callable[..., Any] | None = send
        self._warned = False

    def lower(self, refused_size: int) -> None:
        """A dead letter of ``refused_size`` bytes was refused for its size all the same (the
        topic's limit changed, or batching): later ones are cut to half of that."""
        self.max_bytes = min(self.max_bytes, refused_size // 2)

    def fit(
        self, key: bytes | None, value: bytes | None, headers: Headers
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], str | None]:
        """``key, value, headers`` cut to :attr:`max_bytes` (see the module docstring), and
        what was cut (the truncated header's value, None when the record fits as it is)."""
        limit = self.max_bytes
        if record_size(key, value, headers) <= limit:
            return key, value, list(headers or ()), None
        headers = list(headers or ())
        marker_room = _PER_HEADER + len(HEADER_PAYLOAD_TRUNCATED) + 80
        sizes: dict[str, int] = {}  # part -> original size, in the order cut
        if value is not None:
            sizes["value"] = len(value)
            value = None
        for keep in (_ERROR_TEXT_KEPT, 0):  # first down to their start, at the end entirely
            for name in (_STACKTRACE, _MESSAGE):
                excess = record_size(key, value, headers) + marker_room - limit
                if excess > 0:
                    headers = _cut_header(headers, name, excess, keep, sizes)
            if key is not None and record_size(key, value, headers) + marker_room > limit:
                sizes["key"] = len(key)
                key = None
            if record_size(key, value, headers) + marker_room > limit:
                own = [(n, v) for n, v in headers if not n.startswith(_ERRORS_PREFIX)]
                if own:
                    sizes["headers"] = sum(len(n) + len(v or b"") for n, v in own)
                    headers = [(n, v) for n, v in headers if n.startswith(_ERRORS_PREFIX)]
        marker = ",".join(f"{part}={size}" for part, size in sizes.items())
        return key, value, [*headers, (HEADER_PAYLOAD_TRUNCATED, marker.encode())], marker

    def warn_once(self, marker: str, where: str, dead_letter_topic: str) -> None:
        """One WARN the first time a dead letter is cut (each later one at DEBUG): the
        metric counts them, the header names what was cut; the payload is never logged."""
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        log.log(
            level,
            "dead letter for %s cut to fit %d bytes (%s) and written to %s with header %s; "
            "further cuts are logged at DEBUG and counted in "
            "kafka_streams_task_dead_letter_truncated_records_total",
            where,
            self.max_bytes,
            marker,
            dead_letter_topic,
            HEADER_PAYLOAD_TRUNCATED,
        )


def _cut_header(
    headers: Sequence[tuple[str, bytes | None]], name: str, excess: int, keep: int, sizes: dict[str, int]
) -> list[tuple[str, bytes | None]]:
    """``headers`` with header ``name``'s value shortened by ``excess`` bytes, to no fewer
    than ``keep``; its original size goes into ``sizes`` the first time it is cut."""
    out: list[tuple[str, bytes | None]] = []
    for header, value in headers:
        if header == name and value and len(value) > keep:
            sizes.setdefault(name.removeprefix(_ERRORS_PREFIX), len(value))
            value = value[: max(keep, len(value) - excess)]
        out.append((header, value))
    return out
