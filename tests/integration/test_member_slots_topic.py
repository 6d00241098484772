"""An application's members topic grows to ``member_slots`` where the broker can grow topics.

The members topic's partition count is the most group members a generation's placement
waits for (docs/scale-out.md, "More members than slots"). An application created with the
default 64 that raises ``member_slots`` keeps its topic: Apache Kafka grows it
(CreatePartitions), Tansu cannot, and then the topic keeps its count with a warning naming
the migration (the slot logic itself: tests/unit/runtime/test_member_slots.py).
"""

from __future__ import annotations

import logging

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.runtime.membership.client_membership import grow_members_topic
from tests.support.kafka import new_topic

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


def test_an_existing_members_topic_grows_to_member_slots_where_the_broker_can(
    admin: KafkaAdmin, broker_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = new_topic(admin, 64, "app-members", config={"cleanup.policy": "compact"})
    assert grow_members_topic(admin, name, 32) == 64, "never shrunk: a smaller setting keeps the topic"
    with caplog.at_level(logging.WARNING, logger="platform_streams.runtime.membership.client_membership"):
        count = grow_members_topic(admin, name, 128)
    assert admin.partition_counts([name])[name] == count
    if broker_kind == "kafka":
        assert count == 128
    if broker_kind == "tansu":
        assert count == 64
        assert f"{name} has 64 partitions and could not be grown" in caplog.text
        assert "delete the topic" in caplog.text
    admin.delete_topics([name])
