"""Deserialization and processing exception handling.

Kafka Streams' contract: a record that cannot be deserialized is never dropped
silently. The configured handler either fails the task (``log_and_fail``) or logs
and skips it (``log_and_continue``); a custom callable returns a
:class:`HandlerResponse`. When ``errors_dead_letter_queue_topic_name`` is set
(KIP-1034) the raw record is also written there with headers naming the error and
its origin, whatever the handler decides: the input record being processed (for a
production error too: the headers name the input record, not the output record the
producer refused; ``__streams.errors.output.topic`` names where that one was going), or
null topic with partition and offset -1 where no input record is known (punctuation, a
cache flush, a failure reported after the send). A dead letter too large to be written
whole is cut to the collector's ``dead_letter_limit`` (:mod:`.dead_letters`). Every
handled record is counted.
"""

from __future__ import annotations

import enum
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from platform_streams.processor.dead_letters import DeadLetterLimit
from platform_streams.processor.record_collector import RecordCollector

log = logging.getLogger(__name__)

#: KIP-1034 header names on dead-letter records.
HEADER_EXCEPTION = "__streams.errors.exception"
HEADER_MESSAGE = "__streams.errors.message"
HEADER_STACKTRACE = "__streams.errors.stacktrace"
HEADER_TOPIC = "__streams.errors.topic"
HEADER_PARTITION = "__streams.errors.partition"
HEADER_OFFSET = "__streams.errors.offset"
#: not Kafka's: the topic a refused output record was for (production errors only)
HEADER_OUTPUT_TOPIC = "__streams.errors.output.topic"


class HandlerResponse(enum.Enum):
    """What a custom exception handler tells the runtime to do."""

    CONTINUE = "continue"
    FAIL = "fail"


#: A custom handler: (task context, raw record, exception) -> response.
CustomHandler = Callable[[Any, Any, BaseException], HandlerResponse]


def dead_letter_headers(raw: Any, exc: BaseException) -> list[tuple[str, bytes | None]]:
    """Headers naming the error and the record's origin, after the record's own headers
    (Kafka's ``ExceptionHandlerUtils.buildDeadLetterQueueRecord``: a null topic stays null)."""
    own = list(raw.headers() or [])
    topic = raw.topic()
    return [
        *own,
        (HEADER_EXCEPTION, type(exc).__name__.encode()),
        (HEADER_MESSAGE, str(exc).encode("utf-8", "replace")),
        (HEADER_STACKTRACE, "".join(traceback.format_exception(exc)).encode("utf-8", "replace")),
        (HEADER_TOPIC, None if topic is None else str(topic).encode()),
        (HEADER_PARTITION, str(raw.partition()).encode()),
        (HEADER_OFFSET, str(raw.offset()).encode()),
    ]


#: an exception's text in the skip log is cut here: it may quote the record's payload
_LOGGED_TEXT = 500


def _for_log(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= _LOGGED_TEXT else f"{text[:_LOGGED_TEXT]}... ({len(text)} characters)"


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
    #: of those, the ones cut to fit the size limit (the truncated dead letters metric)
    dead_letters_truncated: int = field(default=0, init=False)

    def handle(
        self, raw: Any, exc: BaseException, extra_headers: list[tuple[str, bytes | None]] | None = None
    ) -> HandlerResponse:
        """Dead-letter ``raw`` (with ``extra_headers`` after the error headers) if a topic is
        set, log, count, and return the decision."""
        self.count += 1
        if self.dead_letter_topic:
            self._dead_letter(self.dead_letter_topic, raw, exc, extra_headers or [])
        response = self._decide(raw, exc)
        if response is HandlerResponse.CONTINUE:
            log.warning(
                "%s error, skipping record at topic %s partition %s offset %s (%s: %s)%s",
                self.kind,
                raw.topic(),
                raw.partition(),
                raw.offset(),
                type(exc).__name__,
                _for_log(exc),
                f"; sent to dead-letter topic {self.dead_letter_topic}" if self.dead_letter_topic else "",
            )
        return response

    def _dead_letter(
        self, topic: str, raw: Any, exc: BaseException, extra_headers: list[tuple[str, bytes | None]]
    ) -> None:
        key, value, headers = raw.key(), raw.value(), [*dead_letter_headers(raw, exc), *extra_headers]
        # the producer-backed collector limits record sizes; the test driver's takes any size
        limit: DeadLetterLimit | None = getattr(self.collector, "dead_letter_limit", None)
        send = self.collector.send if limit is None or limit.send is None else limit.send
        if limit is not None:
            key, value, headers, cut = limit.fit(key, value, headers)
            if cut is not None:
                self.dead_letters_truncated += 1
                where = f"topic {raw.topic()} partition {raw.partition()} offset {raw.offset()}"
                limit.warn_once(cut, where, topic)
        timestamp = raw.timestamp()[1]
        send(topic, key, value, timestamp if timestamp >= 0 else 0, headers, None)
        self.dead_lettered += 1

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
