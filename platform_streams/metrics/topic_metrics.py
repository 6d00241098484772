"""Topic-level series (Kafka Streams' ``stream-topic-metrics``, KIP-613): records and bytes
read from each source topic and written to each sink topic.

Kafka Streams records them per record, at the source node and in the record collector's
send callback. Here the counting stays (nearly) off the per-record path: the worker's input
queues add each run of a partition's records at once, and the worker's shared producer
counts what it sends per topic in place of the plain total it kept before (one dict item
update instead of an integer addition per record; counted in C at an exactly-once commit).
This module only maps those counters to Kafka Streams' tags at scrape time:

* consumed: the partition's task (sub-topology of the topic, partition) and the source
  node reading the topic;
* produced: the sink node(s) writing the topic. ``task_id`` is empty: one producer serves
  all of a worker's tasks, and a delivery report does not say which task sent the record
  (the same convention as the worker-level dropped records). The dead-letter topic is not
  a sink and is left out (it has its own counter).

Bytes are key plus value sizes (Kafka's also add headers) and need a length per record,
so they are counted only at recording level DEBUG (Kafka records them at INFO).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from platform_streams.processor.task_id import TaskId
from platform_streams.topology.nodes import SinkNode

__all__ = ["TopicNodes", "add_topic_series"]

Add = Callable[[str, Sequence[str], float], None]


class TopicNodes:
    """Which source node reads, and which sink nodes write, each physical topic."""

    def __init__(self, plan: Any, application_id: str) -> None:
        #: physical topic -> (sub-topology id, source node name)
        self.sources: dict[str, tuple[int, str]] = {}
        #: physical topic -> sink node names (joined with "," when several write it)
        self.sinks: dict[str, str] = {}
        writers: dict[str, list[str]] = {}
        for sub in plan.subtopologies:
            for topic, node in sub.sources_by_topic.items():
                self.sources[plan.physical_topic(topic, application_id)] = (sub.id, node.name)
            for node in sub.nodes:
                if isinstance(node, SinkNode) and node.topic is not None:
                    writers.setdefault(plan.physical_topic(node.topic, application_id), []).append(node.name)
        self.sinks = {topic: ",".join(sorted(names)) for topic, names in writers.items()}


def add_topic_series(add: Add, thread_id: str, nodes: TopicNodes, inputs: Any, collector: Any) -> None:
    """Add one worker's topic-level samples (``add(name, labels, value)``)."""
    if inputs is not None:
        sizes = inputs.consumed_bytes
        for (topic, partition), records in list(inputs.consumed.items()):
            source = nodes.sources.get(topic)
            if source is None:
                continue
            labels = [thread_id, str(TaskId(source[0], partition)), source[1], topic]
            add("kafka_streams_topic_records_consumed", labels, records)
            if sizes is not None:
                add("kafka_streams_topic_bytes_consumed", labels, sizes.get((topic, partition), 0))
    if collector is not None:
        sizes = collector.produced_bytes
        for topic, records in list(collector.produced.items()):
            sink = nodes.sinks.get(topic)
            if sink is None:
                continue
            labels = [thread_id, "", sink, topic]
            add("kafka_streams_topic_records_produced", labels, records)
            if sizes is not None:
                add("kafka_streams_topic_bytes_produced", labels, sizes.get(topic, 0))
