"""Task -> hosts from a streams group's endpoint information (query/group_hosts.py): the
broker lists each task as its sub-topology's source and repartition topics at the task's
partition (``EndpointToPartitionsManager``); the mapping back goes through the plan."""

from __future__ import annotations

from typing import Any

from kio.schema.streams_group_heartbeat.v0 import response as hb
from kio.schema.types import TopicName
from kio.static.primitive import i32, u16

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized
from platform_streams.kafka.streams_group.member import EndpointPartitions, _endpoints
from platform_streams.query.group_hosts import EndpointInformation, GroupHosts
from platform_streams.query.metadata import HostInfo
from platform_streams.serde import String
from platform_streams.topology import compile_topology

S = String()
APP = "hosts"


def _plan() -> Any:
    """Sub-topology 0 reads ``events``; 1 reads the repartition topic of the re-keyed count."""
    builder = StreamsBuilder()
    builder.stream("events", Consumed(key_serde=S, value_serde=S)).group_by(
        lambda k, v: v, Grouped(key_serde=S, value_serde=S)
    ).count(materialized=Materialized.as_("by_value"))
    return compile_topology(builder.build())


def test_tasks_map_to_the_endpoints_the_broker_names_newest_epoch_first() -> None:
    plan = _plan()
    [repartition] = [t for sub in plan.subtopologies[1:] for t in sub.source_topics]
    physical = plan.physical_topic(repartition, APP)
    a, b = ("a.example", 1), ("b.example", 2)
    old: EndpointInformation = (3, {a: EndpointPartitions(active=frozenset({("events", 0)}))})
    new: EndpointInformation = (
        4,
        {
            a: EndpointPartitions(
                active=frozenset({("events", 1), (physical, 1)}), standby=frozenset({("events", 0)})
            ),
            # another application's topic in the group is not a task of this plan
            b: EndpointPartitions(active=frozenset({("events", 0), ("elsewhere", 5)})),
        },
    )
    heard: list[EndpointInformation | None] = [None]
    group = GroupHosts(plan, APP, lambda: heard)
    assert group.current() is None

    heard.append(old)
    hosts = group.current()
    assert hosts is not None and hosts.active_host("0_0") == HostInfo(*a)

    heard.append(new)  # another worker of the client heard a newer epoch
    hosts = group.current()
    assert hosts is not None and hosts.epoch == 4
    assert hosts.active_host("0_0") == HostInfo(*b)
    assert hosts.standby_hosts("0_0") == {HostInfo(*a)}
    assert hosts.active_host("0_1") == HostInfo(*a) and hosts.active_host("1_1") == HostInfo(*a)
    assert hosts.active_host("1_0") is None and hosts.standby_hosts("1_0") == frozenset()
    assert hosts.active_host("0_5") is None
    assert group.current() is hosts, "one version per epoch"


def test_a_clients_members_are_merged_under_their_shared_endpoint() -> None:
    """The broker sends one entry per member; a client with two workers is two members behind
    one endpoint (Kafka Streams' threads), so its tasks are the union of both entries."""
    def entry(port: int, active: list[int], standby: list[int]) -> hb.EndpointToPartitions:
        def tps(partitions: list[int]) -> tuple[hb.TopicPartition, ...]:
            numbers = tuple(i32(p) for p in partitions)
            return (hb.TopicPartition(topic=TopicName("events"), partitions=numbers),)

        return hb.EndpointToPartitions(
            user_endpoint=hb.Endpoint(host="a.example", port=u16(port)),
            active_partitions=tps(active),
            standby_partitions=tps(standby),
        )

    merged = _endpoints([entry(1, [0], [2]), entry(1, [1], []), entry(2, [2], [0])])
    assert merged == {
        ("a.example", 1): EndpointPartitions(
            frozenset({("events", 0), ("events", 1)}), frozenset({("events", 2)})
        ),
        ("a.example", 2): EndpointPartitions(frozenset({("events", 2)}), frozenset({("events", 0)})),
    }
