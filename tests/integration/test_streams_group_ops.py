"""The operations on an application that runs on a streams group (``group_protocol="streams"``).

The spec is Kafka's own tool for streams groups, ``StreamsGroupCommand``
(tools/src/main/java/org/apache/kafka/tools/streams/StreamsGroupCommand.java, Kafka 4.4):
``--reset-offsets`` resets only an inactive group (``Empty``/``Dead``, else "Assignments can
only be reset if the group '...' is inactive, but the current state is ..."), ``--delete``
deletes an ``EMPTY`` streams group, ``--describe`` shows its state, epochs, members and tasks.
librdkafka's describe answers a streams group with GROUP_ID_NOT_FOUND, which is why the reset
and the topic lifecycle need StreamsGroupDescribe to see it at all.

Streams groups exist only on Apache Kafka 4.2+: these tests use the Apache Kafka node (the
shared one when ``PLATFORM_STREAMS_BOOTSTRAP`` names it, else the session's).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_streams.cli import main
from platform_streams.kafka import KafkaAdmin
from platform_streams.kafka.streams_group_admin import describe_streams_group
from platform_streams.ops import OffsetScenario, OperationRefusedError, ResetOptions, reset_application
from platform_streams.ops.ownership import coordination_names
from platform_streams.ops.topics import delete_internal_topics
from tests.integration.support_apps import app_config, count_app, running_app, wait_committed, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]

RECORDS = 20


def _counts(bootstrap: str, sink: str) -> list[int]:
    """The sink's counts in the order they were written (one partition, one key)."""
    return [int.from_bytes(r.value, "big", signed=True) for r in consume_all(bootstrap, sink, 10**6, 2)]


def test_reset_refuses_a_live_streams_group_then_resets_and_deletes_it(
    streams_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running: ``groups describe`` shows the member, its epoch and its tasks, and the reset
    refuses in one line naming the group's state. Stopped: the reset sets the input offset,
    deletes the streams group (its topology and epochs) and keeps the offset it set, which is
    where the next run starts: it counts the records from there only, from zero."""
    bootstrap = streams_bootstrap
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        source, sink = new_topic(admin, 1, "sgops-in"), new_topic(admin, 1, "sgops-out")
        produce(bootstrap, source, [("k", "v")] * RECORDS)
        config = app_config(bootstrap, tmp_path, group_protocol="streams")
        app = config.application_id
        topology = count_app(source, sink).build()
        def committed() -> int | None:
            return admin.committed_offsets(app, [(source, 0)])[(source, 0)]

        describe = ["groups", "describe", "--application-id", app, "--bootstrap-server", bootstrap]
        with running_app(topology, config) as streams:
            wait_until(lambda: committed() == RECORDS, 60, "every record read")
            [worker] = streams.workers
            assert worker.streams_group is not None
            member_id = worker.streams_group.member_id

            with pytest.raises(OperationRefusedError) as refused:
                reset_application(topology, config, ResetOptions(), admin=admin)
            message = str(refused.value)
            assert "\n" not in message and f"streams group '{app}' is STABLE" in message, message
            assert committed() == RECORDS, "the refusal changed offsets"
            assert describe_streams_group({"bootstrap.servers": bootstrap}, app) is not None

            assert main(describe) == 0
            shown = capsys.readouterr().out
            assert "STABLE" in shown and member_id in shown and "ACTIVE: 0:[0]" in shown, shown
            assert main([*describe, "--json"]) == 0
            described = json.loads(capsys.readouterr().out)
            assert described["group_type"] == "streams" and described["state"] == "STABLE"
            [member] = described["members"]
            assert member["member_id"] == member_id and member["tasks"] == {"active": {"0": [0]}}

        to_5 = ResetOptions(scenario=OffsetScenario.to_offset(5))
        result = reset_application(topology, config, to_5, admin=admin)
        assert result.completed and result.deleted_groups == [app], result
        assert describe_streams_group({"bootstrap.servers": bootstrap}, app) is None, "the group was kept"
        assert committed() == 5, "the next run would not start at offset 5"

        before = len(_counts(bootstrap, sink))
        with running_app(topology, config):
            wait_until(lambda: committed() == RECORDS, 60, "every record read again")
            wait_until(lambda: len(_counts(bootstrap, sink)) > before, 30, "the re-run's output")
        rerun = _counts(bootstrap, sink)[before:]
        assert rerun[-1] == RECORDS - 5 and rerun[0] >= 1, rerun  # from offset 5, from an empty store


def test_deleting_the_topics_deletes_the_stopped_applications_streams_group_and_no_other(
    streams_bootstrap: str, tmp_path: Path
) -> None:
    """``topics delete`` of a stopped application deletes its streams group too (Kafka's
    ``kafka-streams-groups.sh --delete --delete-all-internal-topics``), and nobody else's: a
    stopped application whose id extends ours, known only by its streams group (what a Java
    Kafka Streams application leaves: no coordination topics), keeps its group and changelog."""
    bootstrap = streams_bootstrap
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        source, sink = new_topic(admin, 1, "sgops-in"), new_topic(admin, 1, "sgops-out")
        produce(bootstrap, source, [("k", "v")] * 3)
        config = app_config(bootstrap, tmp_path / "a", group_protocol="streams")
        app = config.application_id
        other = app_config(bootstrap, tmp_path / "b", app_id=f"{app}-v2", group_protocol="streams")
        topology = count_app(source, sink).build()
        for each in (config, other):
            with running_app(topology, each):
                wait_committed(admin, each.application_id, {(source, 0): 3}, "every record read", 60)
        admin.delete_topics([t for t in admin.list_topics() if t in coordination_names(other.application_id)])

        result = delete_internal_topics(topology, config, include_orphans=True, admin=admin)
        assert result.deleted_groups == [app], result
        assert describe_streams_group({"bootstrap.servers": bootstrap}, app) is None
        assert describe_streams_group({"bootstrap.servers": bootstrap}, other.application_id) is not None
        changelog = f"{other.application_id}-counts-changelog"
        assert changelog in admin.list_topics(), "another application's changelog was deleted"
        assert changelog not in [t.topic for t in result.topics], result
