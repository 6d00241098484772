"""Kafka's ``VersionedKeyValueStoreIntegrationTest`` through the TopologyTestDriver.

Source: apache/kafka streams/src/test/java/org/apache/kafka/streams/integration/
VersionedKeyValueStoreIntegrationTest.java. ``shouldPutGetAndDelete`` and the changelog
config of ``shouldSetChangelogTopicProperties`` run here; ``shouldRestore`` and both manual
upgrades (``shouldManualUpgradeFromNonVersioned{NonTimestamped,Timestamped}ToVersioned``: a
restart restoring a versioned store from a key-value store's changelog) run on the broker
(tests/integration/test_versioned_store.py). Not translated:
``shouldAllowCustomIQv2ForCustomStoreImplementations`` (custom store implementations are not
pluggable into the versioned builder here).
"""

from __future__ import annotations

from platform_streams.dsl import Consumed, Produced, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver
from tests.support.versioned import (
    HISTORY_RETENTION,
    INPUT_BATCHES,
    STORE_NAME,
    VersionedStoreContentCheckerProcessor,
    store_builder,
)

INT, S = Integer(), String()
BASE = 1_000_000


def _builder() -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.add_state_store(store_builder())
    (
        builder.stream("input", Consumed(key_serde=INT, value_serde=S))
        .process(lambda: VersionedStoreContentCheckerProcessor(True), STORE_NAME)
        .to("output", Produced(key_serde=INT, value_serde=INT))
    )
    return builder


def test_should_put_get_and_delete() -> None:
    """VersionedKeyValueStoreIntegrationTest.shouldPutGetAndDelete"""
    with TopologyTestDriver(_builder().build(), {}) as driver:
        source = driver.create_input_topic("input", INT, S)
        produced = 0
        for offset, records in INPUT_BATCHES:
            for key, value in records:
                source.pipe_input(key, value, BASE + offset)
                produced += 1
        failures = driver.create_output_topic("output", INT, INT).read_values_to_list()
    assert failures == [0] * produced


def test_should_set_changelog_topic_properties() -> None:
    """VersionedKeyValueStoreIntegrationTest.shouldSetChangelogTopicProperties (the topic config
    the application creates; the broker test checks it on the created topic)."""
    topics = {t.name: dict(t.config) for t in _builder().build().internal_topics.values()}
    config = topics[f"{STORE_NAME}-changelog"]
    assert config["cleanup.policy"] == "compact"
    assert config["min.compaction.lag.ms"] == str(HISTORY_RETENTION + 24 * 60 * 60 * 1000)
