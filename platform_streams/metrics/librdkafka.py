"""A handful of gauges from librdkafka's statistics (``statistics.interval.ms``).

librdkafka emits a JSON document every ``statistics.interval.ms`` (off by default) through
the client's ``stats_cb``; the worker hands it to its metrics recorder when the option is
set in ``consumer_config`` / ``producer_config``. Of its hundreds of fields these are the
ones an operator looks at first: the queues between librdkafka and the application (reply
and message queues), bytes on the wire, and the round-trip time to the brokers.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["STATISTICS", "parse_statistics"]

#: exported suffix -> (librdkafka field, kind, help)
STATISTICS: dict[str, tuple[str, str, str]] = {
    "librdkafka_replyq": (
        "replyq",
        "gauge",
        "Events waiting in librdkafka's queue for the application's poll.",
    ),
    "librdkafka_msg_cnt": (
        "msg_cnt",
        "gauge",
        "Messages in the producer queues (producer) / fetched, not consumed.",
    ),
    "librdkafka_msg_size_bytes": ("msg_size", "gauge", "Bytes of the messages counted by msg_cnt."),
    "librdkafka_tx_bytes": ("tx_bytes", "counter", "Bytes sent to the brokers."),
    "librdkafka_rx_bytes": ("rx_bytes", "counter", "Bytes received from the brokers."),
    "librdkafka_broker_rtt_avg_seconds": (
        "brokers.*.rtt.avg",
        "gauge",
        "Largest average request round-trip time over the brokers in the last interval.",
    ),
}


def parse_statistics(document: str) -> dict[str, float]:
    """The :data:`STATISTICS` values of one statistics JSON document."""
    data: dict[str, Any] = json.loads(document)
    values = {
        suffix: float(data.get(field, 0))
        for suffix, (field, _kind, _help) in STATISTICS.items()
        if not field.startswith("brokers.")
    }
    rtts = [
        float(broker["rtt"]["avg"])
        for broker in data.get("brokers", {}).values()
        if broker.get("nodeid", -1) >= 0 and isinstance(broker.get("rtt"), dict)
    ]
    values["librdkafka_broker_rtt_avg_seconds"] = max(rtts, default=0.0) / 1_000_000  # microseconds
    return values
