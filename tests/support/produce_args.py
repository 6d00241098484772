"""librdkafka's ``Producer.produce`` arguments, as the C binding reads them, for fake producers.

The engine calls ``produce`` positionally where it holds librdkafka's own method
(``(topic, value, key, partition, callback, on_delivery, timestamp, headers)``: keywords
cost ~0.45 us more a call) and with keywords where it holds a ``partial`` binding
``on_delivery``. A fake that reads ``kwargs["timestamp"]`` would see only half of those
calls; this gives every fake the C binding's own reading of both (confluent-kafka-python
src/confluent_kafka/src/Producer.c, ``Producer_produce``: the keyword list and defaults).
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: the C binding's keyword list, in positional order
_NAMES = ("topic", "value", "key", "partition", "callback", "on_delivery", "timestamp", "headers")


class ProduceCall(NamedTuple):
    topic: str
    value: Any
    key: Any
    partition: int  # -1: librdkafka's partitioner decides (RD_KAFKA_PARTITION_UA)
    #: the per-message delivery callback (``callback`` or its alias ``on_delivery``); None: the producer's
    on_delivery: Any
    timestamp: int
    headers: Any


def produce_call(*args: Any, **kwargs: Any) -> ProduceCall:
    """The arguments of one ``produce`` call, positional and keyword, as librdkafka reads them;
    a TypeError for an argument given twice or unknown, as the binding raises."""
    if len(args) > len(_NAMES):
        raise TypeError(f"produce() takes at most {len(_NAMES)} arguments ({len(args)} given)")
    values: dict[str, Any] = dict(zip(_NAMES, args, strict=False))
    for name, value in kwargs.items():
        if name not in _NAMES:
            raise TypeError(f"'{name}' is an invalid keyword argument for produce()")
        if name in values:
            raise TypeError(f"argument for produce() given by name ('{name}') and position")
        values[name] = value
    callback = values.get("callback")
    if callback is None:  # the alias counts only when ``callback`` is not given (None or absent)
        callback = values.get("on_delivery") if "callback" not in values else None
    return ProduceCall(
        values["topic"],
        values.get("value"),
        values.get("key"),
        values.get("partition", -1),
        callback,
        values.get("timestamp", 0),
        values.get("headers"),
    )
