"""The instance directory (query/directory.py) on a real broker: an instance knows its own
assignment as soon as it publishes it, before the metadata topic hands the record back, and
log order still settles claims once records are read.

Kafka Streams' ``KafkaStreams.queryMetadataForKey`` answers from the assignment metadata the
member received in its rebalance (``StreamsMetadataState.onChange``), so at RUNNING its own
tasks are known; the directory's own-publication rule gives the same answer here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.query.directory import InstanceDirectory, InstanceSnapshot
from platform_streams.query.metadata import HostInfo
from tests.integration.support_apps import app_config, wait_until

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


def _snapshot(active: set[str], standby: set[str] = frozenset()) -> InstanceSnapshot:  # type: ignore[assignment]
    return InstanceSnapshot("client", "RUNNING", frozenset(active), frozenset(standby), frozenset({"s"}))


def test_own_publication_is_known_before_it_is_read_back(bootstrap_servers: str, tmp_path: Path) -> None:
    config = app_config(bootstrap_servers, tmp_path)
    me, other = HostInfo("127.0.0.1", 7001), HostInfo("127.0.0.1", 7002)
    mine, theirs = InstanceDirectory(config, me), InstanceDirectory(config, other)
    mine.ensure_topic()
    mine.start()
    theirs.start()
    try:
        assert mine.wait_caught_up(30) and theirs.wait_caught_up(30)
        mine.publish(lambda: _snapshot({"0_0", "0_1"}, {"0_2"}))
        # at once, with no round trip through the topic
        assert mine.active_host("0_0") == me and mine.active_host("0_1") == me
        assert mine.standby_hosts("0_2") == frozenset({me})
        assert [m.host_info for m in mine.all_instances()] == [me]
        # another instance learns it from the topic
        wait_until(lambda: theirs.active_host("0_0") == me, 30, "the other instance reads the claim")
        # a later claim by another instance (higher offset) wins once read, as before
        theirs.publish(lambda: _snapshot({"0_1"}))
        wait_until(lambda: mine.active_host("0_1") == other, 30, "the newer claim of 0_1 read")
        assert mine.active_host("0_0") == me
        # a new publication of this instance ranks above everything read so far
        mine.publish(lambda: _snapshot({"0_0", "0_1"}))
        assert mine.active_host("0_1") == me
    finally:
        theirs.close()
        mine.close()
