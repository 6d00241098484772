"""Interactive-query routing from a streams group's endpoint information (KIP-1071).

Kafka Streams under ``group.protocol=streams`` builds its key metadata from the heartbeat's
``partitionsByUserEndpoint`` (``StreamThread.handleStreamsRebalanceData`` ->
``StreamsMetadataState.onChange``): the broker's own word on which endpoint runs which
task, active or standby. Here a second member of the group is a bare heartbeat loop
(``StreamsGroupMembership``) with an endpoint of its own that never publishes anything to
the application's metadata topic, so the running instance can only name it as a key's host
by reading the broker's endpoint information. Needs Apache Kafka (streams groups).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.kafka.streams_group.group_config import set_group_configs
from platform_streams.kafka.streams_group.member import Assignment
from platform_streams.query.metadata import HostInfo
from platform_streams.runtime.membership.streams_group_membership import StreamsGroupMembership, topology_spec
from platform_streams.serde import String
from tests.integration.support_apps import (
    active_tasks,
    app_config,
    count_app,
    new_app_id,
    running_app,
    wait_until,
)
from tests.support.kafka import new_topic

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]

PARTITIONS = 4
OTHER = HostInfo("other-instance.example", 7071)


class _Tasks:
    """What the bare member runs: its active and standby tasks as ``"<sub>_<partition>"``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active: set[str] = set()
        self.standby: set[str] = set()

    def __call__(self, revoked: Assignment, added: Assignment) -> None:
        with self._lock:
            self.active -= {f"{s}_{p}" for s, p in revoked.active}
            self.active |= {f"{s}_{p}" for s, p in added.active}
            self.standby -= {f"{s}_{p}" for s, p in revoked.standby | revoked.warmup}
            self.standby |= {f"{s}_{p}" for s, p in added.standby | added.warmup}

    def snapshot(self) -> tuple[frozenset[str], frozenset[str]]:
        with self._lock:
            return frozenset(self.active), frozenset(self.standby)


def test_key_hosts_come_from_the_streams_groups_endpoint_information(
    streams_bootstrap: str, tmp_path: Path
) -> None:
    """Every key's active host and standby hosts are those the broker's endpoint information
    gives its task, including an instance that never announced itself; when that instance
    stops heartbeating (as a killed process does) and the broker drops it, its keys are
    routed to the instance that took its tasks over."""
    app_id = new_app_id("sgq")
    with KafkaAdmin({"bootstrap.servers": streams_bootstrap}) as admin:
        source, sink = new_topic(admin, PARTITIONS, "sgq-in"), new_topic(admin, PARTITIONS, "sgq-out")
    # one standby per task: the broker then also names each task's standby endpoint
    set_group_configs(streams_bootstrap, app_id, {"streams.num.standby.replicas": "1"})
    here = HostInfo("127.0.0.1", 7070)
    config = app_config(
        streams_bootstrap, tmp_path, app_id, group_protocol="streams", application_server=str(here)
    )
    keys = [f"key-{i}" for i in range(40)]
    with running_app(count_app(source, sink).build(), config) as streams:
        other_tasks = _Tasks()
        other = StreamsGroupMembership(
            streams_bootstrap,
            app_id,
            topology_spec(streams.plan, app_id),
            process_id="other-process",
            endpoint=(OTHER.host, OTHER.port),
            on_change=other_tasks,
        )
        other.start()
        try:
            wait_until(
                lambda: len(other_tasks.snapshot()[0]) == PARTITIONS // 2
                and len(active_tasks(streams)) == PARTITIONS // 2,
                60,
                "the broker split the tasks between the two members",
            )

            def routed_as_assigned() -> bool:
                theirs, their_standbys = other_tasks.snapshot()
                ours = set(active_tasks(streams))
                for key in keys:
                    meta = streams.query_metadata_for_key("counts", key, String())
                    task = f"0_{meta.partition}"
                    owner, standby = (OTHER, here) if task in theirs else (here, OTHER)
                    assert task in theirs or task in ours, f"{task} has no owner in the test's view"
                    if meta.active_host != owner or (task in their_standbys) != (OTHER in meta.standby_hosts):
                        return False
                    if task in theirs and standby not in meta.standby_hosts:
                        return False
                return True

            wait_until(routed_as_assigned, 30, "key metadata names the hosts the broker assigned")
        finally:
            other.close(leave=False)  # no leave: the broker drops it after its session timeout
        wait_until(
            lambda: len(active_tasks(streams)) == PARTITIONS, 90, "the instance took the dropped tasks"
        )
        wait_until(
            lambda: all(
                streams.query_metadata_for_key("counts", key, String()).active_host == here for key in keys
            ),
            30,
            "every key is routed to the surviving instance",
        )
