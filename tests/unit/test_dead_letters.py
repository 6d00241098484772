"""Cutting a dead letter to a size limit (processor/dead_letters.py), and the size librdkafka
itself checks before it queues a record (the real client: its check needs no broker)."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck
import pytest

from platform_streams.processor.dead_letters import (
    HEADER_PAYLOAD_TRUNCATED,
    DeadLetterLimit,
    message_size,
    record_size,
)


def _headers(message: int = 100, stacktrace: int = 3_000, own: int = 0) -> list[tuple[str, bytes | None]]:
    return [
        *([("trace-id", b"t" * own)] if own else []),
        ("__streams.errors.exception", b"DeserializationError"),
        ("__streams.errors.message", b"m" * message),
        ("__streams.errors.stacktrace", b"s" * stacktrace),
        ("__streams.errors.topic", b"in"),
        ("__streams.errors.partition", b"0"),
        ("__streams.errors.offset", b"20"),
    ]


def _fit(limit: int, key: bytes | None, value: bytes | None, headers: Any) -> tuple[Any, ...]:
    key, value, headers, cut = DeadLetterLimit(limit).fit(key, value, headers)
    assert record_size(key, value, headers) <= limit or cut is not None
    return key, value, dict(headers), cut


def test_a_dead_letter_that_fits_is_left_whole() -> None:
    key, value, headers, cut = _fit(1_000_000, b"k", b"v" * 1000, _headers())
    assert (key, value, cut) == (b"k", b"v" * 1000, None)
    assert HEADER_PAYLOAD_TRUNCATED not in headers


def test_the_value_goes_first() -> None:
    key, value, headers, cut = _fit(1_000_000, b"poison", b"{" * 999_000, _headers())
    assert (key, value, cut) == (b"poison", None, "value=999000")
    assert headers[HEADER_PAYLOAD_TRUNCATED] == b"value=999000"
    assert headers["__streams.errors.stacktrace"] == b"s" * 3_000  # untouched: it fits now


def test_then_the_error_texts_then_the_key_then_the_records_own_headers() -> None:
    # an exception text quoting the bad value: the stack trace (which repeats it) is cut first
    key, value, headers, cut = _fit(20_000, b"k", b"v", _headers(message=15_000, stacktrace=16_000))
    assert (key, value) == (b"k", None)
    assert cut == "value=1,stacktrace=16000"
    assert len(headers["__streams.errors.stacktrace"]) < 16_000
    assert headers["__streams.errors.message"] == b"m" * 15_000
    assert headers["__streams.errors.topic"] == b"in" and headers["__streams.errors.offset"] == b"20"

    key, value, headers, cut = _fit(20_000, b"k" * 30_000, b"v" * 10, _headers())
    assert (key, value, cut) == (None, None, "value=10,stacktrace=3000,key=30000")
    assert headers["__streams.errors.stacktrace"] == b"s" * 1_000  # its start is kept
    assert headers["__streams.errors.message"] == b"m" * 100

    key, value, headers, cut = _fit(5_000, None, None, _headers(message=2_000, stacktrace=2_000, own=20_000))
    assert cut == "stacktrace=2000,message=2000,headers=20008"
    assert "trace-id" not in headers and headers["__streams.errors.exception"] == b"DeserializationError"
    assert len(headers["__streams.errors.stacktrace"] or b"") == 1_000  # room enough once they went

    key, value, headers, cut = _fit(1_500, b"k", None, _headers(message=2_000, stacktrace=2_000))
    assert cut == "stacktrace=2000,message=2000,key=1"
    assert record_size(key, value, list(headers.items())) <= 1_500


def test_lowering_halves_the_refused_size_and_never_raises_the_limit() -> None:
    limit = DeadLetterLimit(1_000_000)
    limit.lower(300_000)
    assert limit.max_bytes == 150_000
    limit.lower(900_000)
    assert limit.max_bytes == 150_000


def _refused_by_librdkafka(max_bytes: int, key: bytes | None, value: bytes | None, headers: Any) -> bool:
    producer = ck.Producer({"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": max_bytes})
    try:
        producer.produce("t", value, key, headers=headers)
    except ck.KafkaException as exc:
        assert exc.args[0].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
        return True
    finally:
        producer.purge()
        producer.flush(0)
    return False


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        (b"k", b"v" * 5_000, None),
        (None, b"v" * 5_000, [("a", b"1"), ("__streams.errors.message", b"m" * 300)]),
        (b"k" * 1_200, None, [("h", None), ("n" * 130, b"x" * 200)]),
    ],
)
def test_message_size_is_the_size_librdkafka_checks(
    key: bytes | None, value: bytes | None, headers: Any
) -> None:
    """Records held for an exactly-once commit are checked with message_size while their input
    record is known: it must refuse exactly what librdkafka's produce would."""
    size = message_size(key, value, headers)
    assert not _refused_by_librdkafka(size, key, value, headers)
    assert _refused_by_librdkafka(size - 1, key, value, headers)


class _Raw:
    """An input record as the handlers get it."""

    def topic(self) -> str:
        return "in"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 20

    def key(self) -> bytes:
        return b"poison"

    def value(self) -> bytes:
        return b"x" * 999_000

    def timestamp(self) -> tuple[int, int]:
        return (1, 5)

    def headers(self) -> list[tuple[str, bytes | None]]:
        return []


def test_the_skip_log_never_dumps_a_payload_the_exception_quotes(caplog: pytest.LogCaptureFixture) -> None:
    from platform_streams.processor.exception_handlers import HandlerResponse, RecordExceptionHandler

    class Collector:
        dead_letter_limit = DeadLetterLimit(1_000_000)
        sent: list[tuple[Any, ...]] = []

        def send(self, *record: Any) -> None:
            self.sent.append(record)

        def partition_count(self, topic: str) -> int:
            return 1

    collector = Collector()
    handler = RecordExceptionHandler("processing", "log_and_continue", "dlq", collector, None)
    with caplog.at_level("DEBUG"):
        assert handler.handle(_Raw(), ValueError("bad value " + "x" * 999_000)) is HandlerResponse.CONTINUE
    assert max(len(r.getMessage()) for r in caplog.records) < 2_000
    assert handler.dead_lettered == 1 and handler.dead_letters_truncated == 1
    (record,) = collector.sent
    headers = dict(record[4])
    assert headers[HEADER_PAYLOAD_TRUNCATED] == b"value=999000,stacktrace=999023,message=999010"
    assert (record[1], record[2]) == (b"poison", None)
    assert record_size(record[1], record[2], record[4]) <= 1_000_000
