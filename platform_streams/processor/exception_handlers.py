"""Deserialization and processing exception handling.

Kafka Streams' contract: a record that cannot be deserialized is never dropped
silently. The configured handler either fails the task (``log_and_fail``) or logs
and skips it (``log_and_continue``); a custom callable returns a
:class:`HandlerResponse`. When ``errors_dead_letter_queue_topic_name`` is set
(KIP-1034) the raw record is also written there with headers naming the error and
its origin, whatever the handler decides. Every handled record is counted.
"""

from __future__ import annotations

import enum
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from platform_streams.processor.record_collector import RecordCollector

log = logging.getLogger(__name__)

#: KIP-1034 header names on dead-letter records.
HEADER_EXCEPTION = "__streams.errors.exception"
HEADER_MESSAGE = "__streams.errors.message"
HEADER_STACKTRACE = "__streams.errors.stacktrace"
HEADER_TOPIC = "__streams.errors.topic"
HEADER_PARTITION = "__streams.errors.partition"
HEADER_OFFSET = "__streams.errors.offset"


class HandlerResponse(enum.Enum):
    """What a custom exception handler tells the runtime to do."""

    CONTINUE = "continue"
    FAIL = "fail"


#: A custom handler: (task context, raw record, exception) -> response.
CustomHandler = Callable[[Any, Any, BaseException], HandlerResponse]


def dead_letter_headers(raw: Any, exc: BaseException) -> list[tuple[str, bytes | None]]:
    """Headers naming the error and the record's origin, after the record's own headers."""
    own = list(raw.headers() or [])
    return [
        *own,
        (HEADER_EXCEPTION, type(exc).__name__.encode()),
        (HEADER_MESSAGE, str(exc).encode("utf-8", "replace")),
        (HEADER_STACKTRACE, "".join(traceback.format_exception(exc)).encode("utf-8", "replace")),
        (HEADER_TOPIC, str(raw.topic()).encode()),
        (HEADER_PARTITION, str(raw.partition()).encode()),
        (HEADER_OFFSET, str(raw.offset()).encode()),
    ]


@dataclass(eq=False, repr=False)
class RecordExceptionHandler:
    """Applies one configured policy (deserialization or processing) for one task.

    ``handle`` sends the raw record to the dead-letter topic when one is set, logs,
    counts, and returns the decision; the caller raises on FAIL with its own
    error type (so the error names what failed: a serde or a processor).
    """

    kind: str
    policy: str | CustomHandler
    dead_letter_topic: str | None
    collector: RecordCollector
    context: Any
    #: records this handler saw (the dropped-records metric reads it)
    count: int = field(default=0, init=False)
    #: records it sent to the dead-letter topic (the dead-letter metric reads it)
    dead_lettered: int = field(default=0, init=False)

    def handle(self, raw: Any, exc: BaseException) -> HandlerResponse:
        self.count += 1
        if self.dead_letter_topic:
            timestamp = raw.timestamp()[1]
            self.collector.send(
                self.dead_letter_topic,
                raw.key(),
                raw.value(),
                timestamp if timestamp >= 0 else 0,
                dead_letter_headers(raw, exc),
                None,
            )
            self.dead_lettered += 1
        response = self._decide(raw, exc)
        if response is HandlerResponse.CONTINUE:
            log.warning(
                "%s error, skipping record at topic %s partition %s offset %s (%s: %s)%s",
                self.kind,
                raw.topic(),
                raw.partition(),
                raw.offset(),
                type(exc).__name__,
                exc,
                f"; sent to dead-letter topic {self.dead_letter_topic}" if self.dead_letter_topic else "",
            )
        return response

    def _decide(self, raw: Any, exc: BaseException) -> HandlerResponse:
        if self.policy == "log_and_continue":
            return HandlerResponse.CONTINUE
        if self.policy == "log_and_fail":
            return HandlerResponse.FAIL
        if callable(self.policy):
            try:
                response = self.policy(self.context, raw, exc)
            except Exception:
                log.exception("%s exception handler raised: failing", self.kind)
                return HandlerResponse.FAIL
            if not isinstance(response, HandlerResponse):
                log.error("%s handler returned %r, not a HandlerResponse: failing", self.kind, response)
                return HandlerResponse.FAIL
            return response
        raise ValueError(f"unknown {self.kind} exception handler {self.policy!r}")
