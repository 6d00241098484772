"""The group-metadata bytes that carry a streams member into a transaction are librdkafka's.

``group_metadata`` writes what ``rd_kafka_consumer_group_metadata_write`` writes; the
exactly-once path of ``group_protocol="streams"`` depends on librdkafka reading them back
(docs/streams-groups.md). Pinned against the bytes librdkafka itself produces for a
consumer that has not joined (generation -1, no member id), and read back by librdkafka's
own reader: a producer accepts them in ``send_offsets_to_transaction``'s argument check
only when they parse.
"""

from __future__ import annotations

from platform_streams.kafka import create_consumer
from platform_streams.kafka.clients import group_membership
from platform_streams.kafka.streams_group import group_metadata


def test_group_metadata_matches_librdkafkas_serialization() -> None:
    consumer = create_consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "app-1"})
    try:
        assert group_metadata("app-1", "", -1) == consumer.consumer_group_metadata()
    finally:
        consumer.close()


def test_the_member_epoch_is_the_generation_librdkafka_reads() -> None:
    raw = group_metadata("app-1", "member-a", 7)

    class _Stub:
        def memberid(self) -> str:
            return "member-a"

        def consumer_group_metadata(self) -> bytes:
            return raw

    assert group_membership(_Stub()) == ("member-a", 7)  # type: ignore[arg-type]
    assert raw.endswith(b"app-1\x00member-a\x00\x01")
    assert group_metadata("app-1", "member-a", 7, instance_id="pod-0").endswith(b"member-a\x00\x00pod-0\x00")
