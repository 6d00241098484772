"""Kafka's ``VersionedKeyValueStoreIntegrationTest`` through the TopologyTestDriver.

Source: apache/kafka streams/src/test/java/org/apache/kafka/streams/integration/
VersionedKeyValueStoreIntegrationTest.java. ``shouldPutGetAndDelete`` and the changelog
config of ``shouldSetChangelogTopicProperties`` run here; ``shouldRestore`` runs on the broker
(tests/integration/test_versioned_store.py). Not translated:
``shouldAllowCustomIQv2ForCustomStoreImplementations`` (custom store implementations are not
pluggable into the versioned builder here) and the manual upgrade from a timestamped store, a
skipped test at the end that says why; the upgrade from a plain key-value store runs on the
broker (``test_should_manual_upgrade_from_non_versioned_non_timestamped_to_versioned``).
"""

from __future__ import annotations

from platform_streams.dsl import Consumed, Produced, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import cases_without_python_equivalent
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


MANUAL_UPGRADE = (
    "restarts an application whose timestamped key-value store is replaced by a versioned one "
    "restored from the same changelog (Kafka's documented manual upgrade). Not supported: a "
    "timestamped store logs its own timestamp+value bytes, where Kafka "
    "(ChangeLoggingTimestampedKeyValueBytesStore) logs the plain value with the timestamp on the "
    "record, so a versioned store would restore 8-byte-prefixed values; changing the format needs "
    "a marker old changelogs lack (docs/oracle.md, 'Changelog records'). The non-timestamped "
    "case runs on the broker (tests/integration/test_versioned_store.py)"
)

# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "VersionedKeyValueStoreIntegrationTest",
    {
        "shouldManualUpgradeFromNonVersionedTimestampedToVersioned": MANUAL_UPGRADE,
    },
)
