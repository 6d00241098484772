"""Classification of librdkafka errors, and their translation into the library's tree.

The runtime reacts to a Kafka error in one of a few ways: retry the call (retriable),
abort the open transaction and carry on (txn_requires_abort), give up the tasks because a
newer instance took over (fenced), or stop the worker (fatal). librdkafka's own flags
(``retriable()``, ``fatal()``, ``txn_requires_abort()``) are the primary signal, but they
are only set on errors that went through specific code paths (e.g. the transactional
API), so a handful of well-known codes is classified here as well.

Everything outside ``platform_streams.kafka`` sees only
:class:`platform_streams.errors.BrokerError` (via :func:`to_broker_error`), never a
``KafkaError``/``KafkaException``.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from platform_streams.errors import BrokerError

__all__ = [
    "as_kafka_error",
    "is_denied",
    "is_fatal",
    "is_fenced",
    "is_retriable",
    "is_txn_requires_abort",
    "to_broker_error",
]

# Codes that are transient on Apache Kafka even when librdkafka did not flag them:
# leadership moves, coordinator (re)loads, rebalances, network hiccups and timeouts.
_RETRIABLE_CODES: frozenset[int] = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.CONCURRENT_TRANSACTIONS,
        KafkaError.UNSTABLE_OFFSET_COMMIT,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.FETCH_SESSION_ID_NOT_FOUND,
        KafkaError.INVALID_FETCH_SESSION_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
    }
)

# A newer producer instance with the same transactional.id took over: the local tasks are
# zombies and must be handed back (Kafka Streams: TaskMigratedException).
_FENCED_CODES: frozenset[int] = frozenset(
    {KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH, KafkaError._FENCED}
)


def as_kafka_error(exc_or_err: BaseException | KafkaError) -> KafkaError | None:
    """Return the ``KafkaError`` carried by a ``KafkaException`` (or the error itself).

    confluent-kafka raises ``KafkaException(KafkaError)``; other exceptions carry none.
    """
    if isinstance(exc_or_err, KafkaError):
        return exc_or_err
    if isinstance(exc_or_err, KafkaException) and exc_or_err.args:
        first = exc_or_err.args[0]
        if isinstance(first, KafkaError):
            return first
    return None


_DENIED = frozenset(
    {
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


def is_denied(err: KafkaError) -> bool:
    """True for an ACL refusal: not transient, whatever librdkafka's retries suggest."""
    return err.code() in _DENIED


def is_fatal(err: KafkaError) -> bool:
    """True if the client instance is unusable and must be recreated (librdkafka fatal error)."""
    return bool(err.fatal()) or err.code() == KafkaError._FATAL


def is_fenced(err: KafkaError) -> bool:
    """True if our producer was fenced by a newer instance (zombie): give the tasks up.

    A transactional producer that is fenced usually surfaces as ``PRODUCER_FENCED`` or
    ``INVALID_PRODUCER_EPOCH``; librdkafka's local ``_FENCED`` covers calls made after
    that. When the fencing is reported through the generic fatal-error path the code is
    ``_FATAL`` and only the reason text names it, hence the text check.
    """
    if err.code() in _FENCED_CODES:
        return True
    return err.code() == KafkaError._FATAL and "fenc" in err.str().lower()


def is_retriable(err: KafkaError) -> bool:
    """True if repeating the same call later may succeed (and the error is not fatal)."""
    if is_fatal(err):
        return False
    return bool(err.retriable()) or err.code() in _RETRIABLE_CODES


def is_txn_requires_abort(err: KafkaError) -> bool:
    """True if the current transaction must be aborted (then a new one may begin)."""
    return bool(err.txn_requires_abort())


def to_broker_error(exc_or_err: BaseException | KafkaError, context: str | None = None) -> BrokerError:
    """Translate a Kafka failure into :class:`BrokerError` for code outside this package.

    ``code`` is the Kafka error name (``"TOPIC_ALREADY_EXISTS"``, ``"_TRANSPORT"``...) so
    callers can log and match on it without importing confluent_kafka. ``context`` says
    what we were doing ("create topic foo"). Use ``raise to_broker_error(e) from e`` to
    keep the original as ``__cause__``.
    """
    err = as_kafka_error(exc_or_err)
    if err is None:
        detail = f"{type(exc_or_err).__name__}: {exc_or_err}"
        message = f"{context}: {detail}" if context else detail
        return BrokerError(message, code=None, retriable=False)
    detail = err.str() or err.name()
    message = f"{context}: {detail}" if context else detail
    return BrokerError(message, code=err.name(), retriable=is_retriable(err))
