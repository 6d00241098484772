"""A cache flush whose changelog records go without delivery reports but for the last.

Why and how the records are still proved written: ``runtime/producing/quiet_changelogs.py``. The
runtime offers a :class:`~platform_streams.state.store_context.QuietSend` with the flush's
``ChangeSender`` (at-least-once with an idempotent changelog producer, once the partition
has an anchor); :func:`flush_reporting_last` runs a flush loop over all entries but the
last with it and over the last one without, and tells the runtime how many records went
quietly -- also when the loop stops half-way, when no reported record follows them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from platform_streams.state.store_context import ChangeSender

__all__ = ["FlushLoop", "QuietCount", "flush_reporting_last", "quiet_logger"]

Entries = list[tuple[bytes, bytes | None, int]]


class QuietCount:
    """What a flush loop sent without reports: how many, and the last one's key and value."""

    __slots__ = ("key", "records", "timestamp", "value")

    def __init__(self) -> None:
        self.records = 0
        self.key = self.value = b""
        self.timestamp = 0


#: ``loop(entries, produce, count)``: flush ``entries``; with ``produce`` (librdkafka's)
#: their changelog records go without a report, each one counted in ``count``
FlushLoop = Callable[[Entries, Callable[..., None] | None, QuietCount | None], None]


def flush_reporting_last(entries: Entries, sender: ChangeSender | None, loop: FlushLoop) -> None:
    """Run ``loop`` over ``entries``: quietly up to the last entry that writes a record (a
    delete of a key the store does not hold writes none), reported from there on. A loop
    that stops half-way leaves quiet records with no reported one after them: the last of
    them is sent again, reported (the same key and value once more: a restore applies it
    twice, to the same effect), so that they are still proved written."""
    quiet = None if sender is None else sender.quiet
    cut = len(entries) - 1
    while cut > 0 and entries[cut][1] is None:
        cut -= 1
    if quiet is None or cut <= 0:
        loop(entries, None, None)
        return
    count = QuietCount()
    try:
        loop(entries[:cut], quiet.produce, count)
        loop(entries[cut:], None, None)
    except BaseException:
        if count.records:
            send, topic, headers, partition, _ = cast("ChangeSender", sender)
            try:
                send(topic, count.key, count.value, count.timestamp, headers, partition)
            except BaseException:
                quiet.sent(count.records, False)
                raise
        quiet.sent(count.records, True)
        raise
    quiet.sent(count.records, True)


def quiet_logger(
    sender: ChangeSender, produce: Callable[..., None], count: QuietCount
) -> Callable[[bytes, bytes, int], None]:
    """``log(key, value, timestamp)``: one changelog record of the flush without a report,
    counted; a record ``produce`` refuses (a full queue, too large) goes through the reported
    send, which waits for room or fails as it does for any changelog record."""
    send, topic, headers, partition, _ = sender
    produce_headers = headers or None

    def log(key: bytes, value: bytes, timestamp: int) -> None:
        try:  # positional only: store_context.QuietSend says why
            produce(topic, value, key, partition, None, None, timestamp, produce_headers)
        except Exception:
            send(topic, key, value, timestamp, headers, partition)
        else:
            count.records += 1
            count.key, count.value, count.timestamp = key, value, timestamp

    return log
