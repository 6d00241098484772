"""Changelog ranges on the control topic (platform_streams/runtime/restore/restore_ranges.py), on the broker.

No Java counterpart (Kafka Streams has no source-position filter to skip). The restores that
use the ranges are tested in tests/integration/test_stateful_counts.py; here: what a clean
close publishes, and that deleting a changelog while the control topic stays forgets the
ranges (they name offsets of the deleted topic).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.ops import delete_internal_topics
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore.restore_ranges import forget_published_ranges
from platform_streams.serde import Long, String
from tests.integration.support_apps import app_config, count_app, running_app
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, L = String(), Long()


def test_a_clean_close_publishes_ranges_and_deleting_the_changelog_forgets_them(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 2, "ranges-in"), new_topic(admin, 2, "ranges-out")
    config = app_config(bootstrap_servers, tmp_path / "state")
    changelog = f"{config.application_id}-counts-changelog"
    app = count_app(source, sink)
    produce(bootstrap_servers, source, [(f"k{i % 50}", "x") for i in range(500)])
    with running_app(app, config):
        consume_all(bootstrap_servers, sink, 50, timeout_s=30)
    with running_app(app, config) as streams:  # a second client reads them from the control topic
        ranges = streams.membership.restore_ranges
        published = {t: ranges.latest(TaskId(0, t)) for t in (0, 1)}
        assert all(r is not None and r.changelogs for r in published.values()), published
        for partition, task_ranges in published.items():
            assert task_ranges is not None
            assert set(task_ranges.inputs) == {(source, partition)}
            assert set(task_ranges.changelogs) == {(changelog, partition)}
    result = delete_internal_topics(app.build(), config, topics=[changelog], admin=admin)
    assert [t.status for t in result.topics] == ["deleted"]
    assert forget_published_ranges(config) == 0, "the deletion wrote their tombstones"
    with running_app(app, config) as streams:
        ranges = streams.membership.restore_ranges
        # its restore waited for the control channel to read the topic: the tombstones too
        assert ranges.latest(TaskId(0, 0)) is None and ranges.latest(TaskId(0, 1)) is None
