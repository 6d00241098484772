"""Reading a dead-letter topic: its records' KIP-1034 headers decoded, committed records up to
an end, and the count by error class (the Dagster dead-letter check's metadata)."""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from platform_streams.errors import BrokerError, StreamsTimeoutError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaError,
    Message,
    TopicPartition,
    create_consumer,
    log_end_offsets,
)
from platform_streams.processor.dead_letters import HEADER_PAYLOAD_TRUNCATED
from platform_streams.processor.exception_handlers import (
    HEADER_EXCEPTION,
    HEADER_OFFSET,
    HEADER_OUTPUT_TOPIC,
    HEADER_PARTITION,
    HEADER_TOPIC,
)

__all__ = ["READER", "DeadLetter", "dead_letter_counts", "decode", "headers_of", "read_dead_letters"]

log = logging.getLogger(__name__)

#: an assign()-based reader of committed records that reports each partition's end
READER: dict[str, Any] = {
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 10,
}


@dataclass(frozen=True)
class DeadLetter:
    partition: int
    offset: int
    error_class: str | None
    source: tuple[str, int, int] | None
    output_topic: str | None
    truncated: str | None

    @property
    def where(self) -> str:
        return f"{self.partition}:{self.offset}"


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def headers_of(msg: Message) -> list[tuple[str, bytes | None]]:
    raw: Any = msg.headers() or []
    return [(n, v.encode() if isinstance(v, str) else v) for n, v in raw]


def decode(msg: Message) -> DeadLetter:
    headers = dict(headers_of(msg))
    topic = _text(headers.get(HEADER_TOPIC))
    try:
        partition = int(_text(headers.get(HEADER_PARTITION)) or "-1")
        offset = int(_text(headers.get(HEADER_OFFSET)) or "-1")
    except ValueError:
        partition = offset = -1
    return DeadLetter(
        partition=msg.partition() or 0,
        offset=msg.offset() or 0,
        error_class=_text(headers.get(HEADER_EXCEPTION)),
        source=(topic, partition, offset) if topic and partition >= 0 and offset >= 0 else None,
        output_topic=_text(headers.get(HEADER_OUTPUT_TOPIC)),
        truncated=_text(headers.get(HEADER_PAYLOAD_TRUNCATED)),
    )


_TERMINAL = frozenset(
    {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE, KafkaError.UNKNOWN_TOPIC_OR_PART,
     KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION, KafkaError.TOPIC_AUTHORIZATION_FAILED}
)  # fmt: skip


def read_dead_letters(
    consumer: Any, ends: dict[int, int], todo: set[int], timeout_s: float
) -> Iterator[Message]:
    """Committed records of the ``todo`` partitions, each up to its end offset or its EOF."""
    last_progress = time.monotonic()
    while todo:
        messages = consumer.consume(num_messages=500, timeout=0.2)
        if not messages and time.monotonic() - last_progress > timeout_s:
            raise StreamsTimeoutError(
                f"dead-letter replay: no progress in {timeout_s:.0f}s on partitions {sorted(todo)}"
            )
        for msg in messages:
            p = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(p)
                    continue
                if err.fatal() or err.code() in _TERMINAL:
                    raise BrokerError(f"dead-letter replay: {err.str()}", code=err.name())
                log.debug("dead-letter replay: transient consumer error %s", err)
                continue
            last_progress = time.monotonic()
            if p not in todo or (msg.offset() or 0) >= ends[p]:
                todo.discard(p)
                continue
            yield msg
            if (msg.offset() or 0) + 1 >= ends[p]:
                todo.discard(p)


def dead_letter_counts(client_conf: Mapping[str, Any], topic: str, timeout_s: float = 30.0) -> dict[str, int]:
    """Every committed dead letter of ``topic``, by error class (the Dagster dead-letter
    check's metadata), with ``client_conf`` (``bootstrap.servers``, security). Reads the whole
    topic without a group; commits nothing."""
    conf = {**client_conf, "group.id": f"platform-streams-dlq-count-{uuid.uuid4().hex[:12]}", **READER}
    with KafkaAdmin(dict(client_conf)) as admin:
        partitions = admin.partition_counts([topic]).get(topic) or 0
        ends = log_end_offsets(conf, [(topic, p) for p in range(partitions)], timeout_s, admin=admin)
    todo = {p for p in range(partitions) if ends[(topic, p)] > 0}
    counts: Counter[str] = Counter()
    if not todo:
        return {}
    consumer = create_consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        for msg in read_dead_letters(
            consumer, {p: ends[(topic, p)] for p in range(partitions)}, todo, timeout_s
        ):
            counts[decode(msg).error_class or "(none)"] += 1
    finally:
        consumer.close()
    return dict(counts)
