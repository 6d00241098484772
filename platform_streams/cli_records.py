"""``platform-streams produce TOPIC`` and ``platform-streams consume TOPIC``: test records by hand.

For trying an application without writing a client: ``produce`` sends the lines of stdin
(``key<TAB>value``, ``--key-separator`` to change the tab) and ``consume`` prints records as
the same lines, so the output of one is the input of the other::

    printf 'o-1\\t{"amount": 250}\\n' | platform-streams produce orders --bootstrap-server 127.0.0.1:9092
    platform-streams consume big-orders --from-beginning --max-messages 1 --bootstrap-server 127.0.0.1:9092

Both take the application's ``--config``/``--set`` settings (only the connection ones are used:
``bootstrap.servers``, security, ``client_config``), so ``--config examples/orders.yaml``
reaches the same cluster as ``run``. The producer uses the partitioner of the application's
own producers (``murmur2_random``, Java's for keyed records): a key lands on the partition Kafka
Streams expects it on. The consumer joins no group (it assigns every partition of the topic:
nothing is committed, no application's group is disturbed) and reads committed records only,
unless ``--isolation read_uncommitted``. A null key or value prints as ``null``, as
kafka-console-consumer prints it. Neither command creates a topic: a missing one is an error
(exit 1) naming it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from platform_streams.cli_app_loader import APP_CODE_FAILED, CliError, add_config_arguments, load_config
from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaError,
    Message,
    TopicPartition,
    create_consumer,
    create_producer,
    log_end_offsets,
)
from platform_streams.stop_request import StopRequest

__all__ = ["add_consume_arguments", "add_produce_arguments", "run_consume", "run_produce"]

log = logging.getLogger("platform_streams.cli")

#: the application id these commands give the settings when none is set (it names no group:
#: neither command joins one; it only lets a bare ``--bootstrap-server`` make valid settings)
_DEFAULT_ID = "platform-streams-cli"
_FLUSH_TIMEOUT_S = 30.0


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC", help="the topic (it must exist)")
    add_config_arguments(parser)
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="the cluster (the same as --set bootstrap.servers=HOST:PORT)",
    )
    parser.add_argument(
        "--key-separator",
        default="\t",
        metavar="SEP",
        help="what separates the key from the value on a line (default: a tab)",
    )


def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    _connection_arguments(parser)
    parser.add_argument(
        "--no-key",
        action="store_true",
        help="every line is a value with a null key (default: key<SEP>value; a line without SEP is an error)",
    )


def add_consume_arguments(parser: argparse.ArgumentParser) -> None:
    _connection_arguments(parser)
    parser.add_argument(
        "--from-beginning", action="store_true", help="start at the first record (default: only new records)"
    )
    parser.add_argument(
        "--max-messages", type=int, default=None, metavar="N", help="stop after N records (default: no limit)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop when no record came for SECONDS (default: run until SIGTERM/Ctrl-C)",
    )
    parser.add_argument(
        "--isolation",
        choices=("read_committed", "read_uncommitted"),
        default="read_committed",
        help="read_committed (default): records of aborted or open transactions are not shown",
    )


def _settings(args: argparse.Namespace) -> StreamsConfig:
    overrides = list(args.overrides)
    if args.bootstrap_server:
        overrides.append(f"bootstrap.servers={args.bootstrap_server}")
    return load_config(args.config, overrides, {"application.id": _DEFAULT_ID})


def _partitions(admin: KafkaAdmin, topic: str) -> int:
    count = admin.partition_counts([topic])[topic]
    if count is None:
        raise CliError(f"topic {topic!r} does not exist (nothing creates it here)", APP_CODE_FAILED)
    return count


def _lines(stream: TextIO) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(stream, start=1):
        line = raw.rstrip("\r\n")
        if line:
            yield number, line


def run_produce(args: argparse.Namespace) -> int:
    """Send stdin's lines to ``args.topic``; exit 1 if any record was not delivered."""
    config = _settings(args)
    separator: str = args.key_separator
    if not separator and not args.no_key:
        raise CliError("--key-separator must not be empty (or use --no-key)")
    with KafkaAdmin(config.admin_configs()) as admin:
        _partitions(admin, args.topic)
    conf: dict[str, Any] = {
        **config.producer_configs(),
        "client.id": f"{config.effective_client_id}-produce",
        "linger.ms": 5,
        "partitioner": "murmur2_random",
    }
    producer = create_producer(conf)
    failures: list[str] = []
    sent = 0

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}: {err.str()}")

    for number, line in _lines(sys.stdin):
        if args.no_key:
            key, value = None, line
        else:
            key, sep, value = line.partition(separator)
            if not sep:
                producer.flush(_FLUSH_TIMEOUT_S)
                raise CliError(
                    f"stdin line {number}: no key separator {separator!r} in {line[:40]!r} "
                    f"({sent} earlier record(s) sent); use --key-separator SEP, or --no-key for values only"
                )
        while True:
            try:
                producer.produce(
                    args.topic,
                    value=value.encode(),
                    key=None if key is None else key.encode(),
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.5)
        sent += 1
        producer.poll(0)
    remaining = producer.flush(_FLUSH_TIMEOUT_S)
    if failures or remaining:
        lost = len(failures) + remaining
        first = failures[0] if failures else f"not acknowledged within {_FLUSH_TIMEOUT_S:.0f}s"
        raise CliError(f"{lost} of {sent} record(s) not delivered to {args.topic!r}: {first}", 1)
    log.info("produced %d record(s) to %r", sent, args.topic)
    return 0


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def run_consume(args: argparse.Namespace) -> int:
    """Print the records of ``args.topic`` as ``key<SEP>value`` lines until a stop condition."""
    if args.max_messages is not None and args.max_messages < 1:
        raise CliError(f"--max-messages must be >= 1, got {args.max_messages}")
    config = _settings(args)
    conf: dict[str, Any] = {
        **config.restore_consumer_configs(),
        "client.id": f"{config.effective_client_id}-consume",
        "isolation.level": args.isolation,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    }
    with KafkaAdmin(config.admin_configs()) as admin:
        wanted = [(args.topic, p) for p in range(_partitions(admin, args.topic))]
        starts = (
            dict.fromkeys(wanted, OFFSET_BEGINNING)
            if args.from_beginning
            else log_end_offsets(conf, wanted, admin=admin)
        )
    # a group.id is required by librdkafka even for assign(); nothing is ever committed to it
    consumer = create_consumer({**conf, "group.id": f"{config.effective_client_id}-consume"})
    stop = StopRequest()
    printed = 0
    try:
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in starts.items()])
        log.info(
            "reading %r (%d partition(s)) from %s, %s",
            args.topic,
            len(starts),
            "the beginning" if args.from_beginning else "its end: new records only",
            args.isolation,
        )
        last_record = time.monotonic()
        with stop.on_signals(exit_on_second=True):
            while not stop.is_set():
                if args.timeout is not None and time.monotonic() - last_record >= args.timeout:
                    break
                for msg in consumer.consume(num_messages=500, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise BrokerError(f"consume {args.topic!r}: {err.str()}", code=err.name())
                    sys.stdout.write(f"{_text(msg.key())}{args.key_separator}{_text(msg.value())}\n")
                    printed += 1
                    last_record = time.monotonic()
                    if printed == args.max_messages:
                        stop.set()
                        break
                sys.stdout.flush()
    finally:
        consumer.close()
    log.info("consumed %d record(s) from %r", printed, args.topic)
    return 0
