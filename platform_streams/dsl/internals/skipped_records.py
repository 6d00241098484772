"""One place for the DSL processors' "skipping record" path, with Kafka Streams' log text.

Kafka's DSL processors (KStreamAggregate, KStreamReduce, the window/session/sliding
aggregates, KStreamKStreamJoin, the foreign-key join processors) drop a record they cannot
process (a null key or value, a null foreign key), count it in the task's dropped-records
metric and log a warning naming the record's topic, partition and offset. The same text here
keeps operators' log searches working when an application moves from Java.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from platform_streams.processor.context import NodeContext

log = logging.getLogger(__name__)


def skip_record(context: NodeContext, why: str) -> None:
    """Count the current record as dropped and warn ``Skipping record due to <why>.`` as Kafka."""
    context.task.dropped_records += 1
    meta = context.record_metadata()
    if meta is not None:
        log.warning(
            "Skipping record due to %s. topic=[%s] partition=[%s] offset=[%s]",
            why,
            meta.topic,
            meta.partition,
            meta.offset,
        )
    else:
        log.warning("Skipping record due to %s. Topic, partition, and offset not known.", why)
