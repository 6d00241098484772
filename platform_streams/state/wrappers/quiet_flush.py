"""A cache flush whose changelog records go without delivery reports but for the last.

Why and how the records are still proved written: ``runtime/quiet_changelogs.py``. The
runtime offers a :class:`~platform_streams.state.store_context.QuietSend` with the flush's
``ChangeSender`` (at-least-once with an idempotent changelog producer, once the partition
has an anchor); :func:`flush_reporting_last` runs a flush loop over all entries but the
last with it and over the last one without, and tells the runtime how many records went
quietly -- also when the loop stops half-way, when no reported record follows them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from platform_streams.state.store_context import ChangeSender

__all__ = ["FlushLoop", "flush_reporting_last", "quiet_logger"]

Entries = list[tuple[bytes, bytes | None, int]]
#: ``loop(entries, produce, counter)``: flush ``entries``; with ``produce`` (librdkafka's)
#: their changelog records go without a report, each one counted in ``counter[0]``
FlushLoop = Callable[[Entries, Callable[..., None] | None, list[int] | None], None]


def flush_reporting_last(entries: Entries, sender: tuple[ChangeSender, int] | None, loop: FlushLoop) -> None:
    """Run ``loop`` over ``entries``: quietly for all but the last where the runtime allows."""
    quiet = None if sender is None else sender[0].quiet
    if quiet is None or len(entries) < 2:
        loop(entries, None, None)
        return
    counter = [0]
    try:
        loop(entries[:-1], quiet.produce, counter)
        loop(entries[-1:], None, None)
    except BaseException:
        quiet.sent(counter[0], False)
        raise
    quiet.sent(counter[0], True)


def quiet_logger(
    sender: tuple[ChangeSender, int], produce: Callable[..., None], counter: list[int]
) -> Callable[[bytes, bytes], None]:
    """``log(key, value)``: one changelog record of the flush without a report, counted; a
    record ``produce`` refuses (a full queue, too large) goes through the reported send,
    which waits for room or fails as it does for any changelog record."""
    (send, topic, headers, partition, _), timestamp = sender
    options: dict[str, Any] = {"timestamp": timestamp}
    if headers:  # no ``headers=None``: librdkafka's produce is ~90 ns slower with it
        options["headers"] = headers

    def log(key: bytes, value: bytes) -> None:
        try:
            produce(topic, value, key, partition, **options)
        except Exception:
            send(topic, key, value, timestamp, headers, partition)
        else:
            counter[0] += 1

    return log
