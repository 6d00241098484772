"""A regex source on the real broker: the topics it matches at start are read, and a matching
topic created while the application runs is picked up at the next metadata refresh.

Kafka's RegexSourceIntegrationTest (streams/integration-tests/src/test/java/org/apache/kafka/
streams/integration/RegexSourceIntegrationTest.java), ``testRegexMatchesTopicsAWhenCreated``: a
topic created after start joins the subscription and its records are processed.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.serde import String
from tests.integration.support_apps import active_tasks, app_config, running_app
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = pytest.mark.broker

S = String()


def test_a_matching_topic_created_while_running_is_read_after_the_next_refresh(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    prefix = f"orders-{uuid.uuid4().hex[:8]}"
    first = f"{prefix}-us"
    admin.create_topics([TopicSpec(first, 2)])
    sink = new_topic(admin, 1, "upper")
    builder = StreamsBuilder()
    builder.stream(re.compile(f"{re.escape(prefix)}-.*"), Consumed(key_serde=S, value_serde=S)).map_values(
        str.upper
    ).to(sink, Produced(key_serde=S, value_serde=S))
    config = app_config(bootstrap_servers, tmp_path, consumer_config={"metadata.max.age.ms": 500})
    produce(bootstrap_servers, first, [("k1", "a"), ("k2", "b")])
    with running_app(builder, config) as streams:
        assert active_tasks(streams) == ["0_0", "0_1"]
        got = consume_all(bootstrap_servers, sink, 2, timeout_s=60)
        assert sorted(r.value.decode() for r in got if r.value) == ["A", "B"]
        # a new topic the pattern matches: its records arrive; its partitions join the tasks of
        # the same partition number (one task per sub-topology partition, as Kafka)
        second = f"{prefix}-eu"
        admin.create_topics([TopicSpec(second, 2)])
        produce(bootstrap_servers, second, [(f"e{i}", f"x{i}") for i in range(6)])
        got = consume_all(bootstrap_servers, sink, 8, timeout_s=90)
        assert sorted(r.value.decode() for r in got if r.value) == ["A", "B"] + [f"X{i}" for i in range(6)]
        assert active_tasks(streams) == ["0_0", "0_1"]
        assert sorted(t for w in streams.workers for t in w.source_topics) == sorted([first, second])
