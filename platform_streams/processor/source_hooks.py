"""What a source function needs from its task besides the topology: one value, built once.

A task's source topics each get a ``(raw_record)`` function, fused
(:func:`~platform_streams.processor.fused_source.compile_source`) or plain
(:func:`~platform_streams.processor.plain_nodes.plain_source`, ``fusion=False``). Both take
the same deserializers and callbacks; they are listed here once so the two stay in step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from platform_streams.processor.context import TaskContext
from platform_streams.processor.partitioner import PlacementCheck

__all__ = ["BatchHooks", "SourceHooks"]


class SourceHooks(NamedTuple):
    """The per-task parts of one source function (see each field)."""

    #: whose ``stream_time`` the source advances
    task: TaskContext
    #: None when the key bytes are the key (fused code then skips the call)
    key_deserializer: Callable[[Any], Any] | None
    #: None when the value bytes are the value
    value_deserializer: Callable[[Any], Any] | None
    #: ``(raw_record, exc)``: the deserialization exception handler
    on_deserialization_error: Callable[[Any, BaseException], None]
    #: ``(raw_record, timestamp)``: a negative timestamp (the record is skipped)
    on_invalid_timestamp: Callable[[Any, int], None]
    #: stream time minus the record's timestamp (DEBUG metrics only; None: no trace of it)
    on_record_lateness: Callable[[int], None] | None = None
    #: only for source topics whose placement key queries rely on
    placement_check: PlacementCheck | None = None
    #: ``Serde.fast_deserializer`` for non-None values (fused code only; the value
    #: deserializer runs on the same bytes when it raises, for the serde's own error)
    value_fast_deserializer: Callable[[bytes], Any] | None = None


class BatchHooks(NamedTuple):
    """What a fused batch (:func:`~platform_streams.processor.fused_source.compile_batch`)
    calls its task for: the per-record work of ``StreamTask.process`` around the source."""

    #: ``(raw_record, exc)``: the processing exception handler; returns to skip, raises to stop
    on_failure: Callable[[Any, Exception], None]
    #: ``(raw_record)`` after each record while the task has stream-time punctuators
    on_stream_punctuation: Callable[[Any], None]
    #: ``(last record processed or None, records processed)``: once, at the batch's end,
    #: also when it ends by an exception
    on_progress: Callable[[Any, int], None]
