"""State TTL of a DSL key-value store (``Materialized.with_ttl``): the one rule for expiry.

Not a Kafka Streams feature (Kafka users write it with a punctuator; Quix and Responsive
have it built in). The meaning, used by every read and by the sweep alike:

* an entry's *last update* is its stored timestamp: the timestamp of the table row, i.e. of
  the record that wrote it (an aggregate's is the largest timestamp aggregated into it, so an
  out-of-order record refreshes it without moving it back);
* *now* is the task's stream time (the largest record timestamp the task has processed; -1
  before its first record, after a restart too, when nothing expires);
* the entry is expired when ``last update + ttl <= stream time``; it then reads as absent
  (processors, value getters of joins, interactive queries);
* a stream-time sweep, every ``sweep interval`` of stream time (aligned to 0, as Kafka's
  stream-time punctuations are), deletes the expired entries through the store: a changelog
  tombstone (so a restore agrees) and, as for any delete of a table, a tombstone downstream
  (with the old value to whoever asked for old values), timestamped with the stream time.

A TTL store never takes the record cache's direct paths (``direct_cache_path``,
``aggregate_step``, ``aggregate_fragment``): its reads go through the layered methods, where
this module's check is made, rather than through a second copy of the check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from platform_streams.processor.api import PunctuationType
from platform_streams.processor.context import TaskContext
from platform_streams.processor.punctuation import PunctuationSchedule
from platform_streams.state.store_context import StateStoreContext
from platform_streams.state.timestamped import ValueAndTimestamp

#: a store's entries as its timestamped layers give them
Items = Iterator[tuple[Any, ValueAndTimestamp]]

__all__ = ["StoreTtl", "expired"]


def expired(timestamp: int, ttl_ms: int, stream_time: int) -> bool:
    """Whether an entry last updated at ``timestamp`` has expired at ``stream_time``."""
    return timestamp + ttl_ms <= stream_time


class StoreTtl:
    """The TTL of one store in one task: read checks against the task's stream time, and the
    sweep, a stream-time punctuation of the task (scheduled at ``start``)."""

    def __init__(self, store_name: str, ttl_ms: int, sweep_interval_ms: int) -> None:
        self.store_name = store_name
        self.ttl_ms = ttl_ms
        self.sweep_interval_ms = sweep_interval_ms
        self._context: StateStoreContext | None = None
        self._schedule: PunctuationSchedule | None = None

    def start(self, context: StateStoreContext, sweep: Callable[[int], None]) -> None:
        """Read stream time from ``context``; sweep with ``sweep(stream_time)`` where the context
        is a task's (a standby's queue never fires; other contexts have no stream time)."""
        self.stop()
        self._context = context
        if isinstance(context, TaskContext):
            node = f"{self.store_name}-ttl-sweep"
            interval = self.sweep_interval_ms
            self._schedule = context.schedule(node, interval, PunctuationType.STREAM_TIME, sweep)

    def stop(self) -> None:
        if self._schedule is not None:
            self._schedule.cancel()
            self._schedule = None

    def stream_time(self) -> int:
        context = self._context
        return -1 if context is None else context.current_stream_time_ms()

    def live(self, vat: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        """``vat``, or None when it has expired."""
        if vat is None or expired(vat[1], self.ttl_ms, self.stream_time()):
            return None
        return vat

    def live_items(self, items: Items) -> Items:
        """The entries of ``items`` that have not expired (stream time read once per scan)."""
        ttl_ms, now = self.ttl_ms, self.stream_time()
        return ((key, vat) for key, vat in items if not expired(vat[1], ttl_ms, now))

    def expired_keys(self, items: Items, now: int) -> list[Any]:
        """The keys of ``items`` expired at ``now``, collected before anything is deleted."""
        ttl_ms = self.ttl_ms
        return [key for key, vat in items if expired(vat[1], ttl_ms, now)]
