"""Blocking broker calls of the runtime, retried through transient outages.

Why one helper: a commit, an offset fetch or a transaction step can fail because the broker
is briefly unreachable (paused, restarting, a leader moving). Those calls are retried until
``task_timeout_ms`` has passed, so an application rides out tens of seconds of broker
trouble by itself; what is not transient is translated into the exception the worker
reacts to:

* the group moved on without us (unknown member, stale generation, a rebalance, a fenced
  static member) -> :class:`TaskMigratedError`: close the tasks dirty and rejoin;
* a newer producer with our transactional.id exists -> :class:`ProducerFencedError`;
* the open transaction can only be aborted -> :class:`TaskCorruptedError`: abort, rebuild
  the tasks' state from the changelogs;
* anything else -> :class:`BrokerError`.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from platform_streams.errors import (
    ProducerFencedError,
    StreamsError,
    StreamsTimeoutError,
    TaskCorruptedError,
    TaskMigratedError,
)
from platform_streams.kafka import (
    KafkaException,
    as_kafka_error,
    is_fatal,
    is_fenced,
    is_retriable,
    to_broker_error,
)

__all__ = ["Outcome", "classify", "retrying", "translate"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Group-coordinator answers meaning "you are not (or no longer) the member you think you are".
_MIGRATION_CODES = frozenset(
    {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID"}
)


class Outcome(enum.Enum):
    """What a failed broker call means for the worker."""

    RETRY = "retry"
    MIGRATED = "migrated"
    FENCED = "fenced"
    ABORTABLE = "abortable"
    FATAL = "fatal"


def classify(exc: BaseException) -> Outcome:
    """Sort a librdkafka failure into the reactions the worker knows."""
    err = as_kafka_error(exc)
    if err is None:
        return Outcome.FATAL
    if err.name() in _MIGRATION_CODES:
        return Outcome.MIGRATED
    if is_fenced(err):
        return Outcome.FENCED
    if err.txn_requires_abort():
        return Outcome.ABORTABLE
    if is_fatal(err):
        return Outcome.FATAL
    if is_retriable(err):
        return Outcome.RETRY
    return Outcome.FATAL


def translate(exc: BaseException, what: str) -> StreamsError:
    """The library exception for a failure that is not retried."""
    outcome = classify(exc)
    if outcome is Outcome.MIGRATED:
        return TaskMigratedError(f"{what}: the consumer group moved on without this member ({exc})")
    if outcome is Outcome.FENCED:
        return ProducerFencedError(
            f"{what}: the producer was fenced (a newer producer with the same transactional.id, or "
            f"the broker aborted the transaction after transaction.timeout.ms) ({exc})"
        )
    if outcome is Outcome.ABORTABLE:
        return TaskCorruptedError([], f"{what}: the transaction must be aborted ({exc})")
    return to_broker_error(exc, what)


def retrying(fn: Callable[[], T], what: str, timeout_s: float, *, pause_s: float = 0.2) -> T:
    """Call ``fn`` until it succeeds, retrying transient broker errors for up to ``timeout_s``.

    Raises the translated error (see :func:`translate`) for anything else, and
    :class:`StreamsTimeoutError` when the broker stays unavailable past the deadline.
    """
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            return fn()
        except KafkaException as exc:
            if classify(exc) is not Outcome.RETRY:
                raise translate(exc, what) from exc
            attempt += 1
            if time.monotonic() >= deadline:
                raise StreamsTimeoutError(
                    f"{what}: broker still unavailable after {timeout_s:.0f}s (task_timeout_ms): {exc}"
                ) from exc
            log_fn = log.warning if attempt == 1 or attempt % 25 == 0 else log.debug
            log_fn("%s failed with a transient error (attempt %d, will retry): %s", what, attempt, exc)
            time.sleep(pause_s)
