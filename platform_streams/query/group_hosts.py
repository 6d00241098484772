"""Which instance hosts a task, as the broker's streams group says (KIP-1071).

Under ``group_protocol="streams"`` every heartbeat answer may carry the group's endpoint
information: per member with an ``application_server``, the source partitions of its active
and standby tasks (the broker's ``EndpointToPartitionsManager``: a task is its
sub-topology's source and repartition topics at the task's partition). Kafka Streams builds
its key metadata from exactly that (``StreamThread`` hands it to
``StreamsMetadataState.onChange``), so a key query is routed by the broker's assignment
rather than by what instances published about themselves. Two things follow that the
instance directory (query/directory.py) cannot give:

* an instance killed without a tombstone stops being named once the broker dropped it
  (its session timed out), not only once another instance claims its tasks;
* a task between two owners (revoked from one, not yet reported by the other) has no active
  host: "not available, retry", as in Kafka Streams, rather than the old owner's claim.

The directory stays the source for what the broker does not say (each instance's state and
stores: ``all_instances``); this module answers only "who runs task T".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from platform_streams.kafka.streams_group.member import EndpointPartitions
from platform_streams.query.metadata import HostInfo
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["EndpointInformation", "GroupHosts", "TaskHosts"]

#: (the broker's endpoint-information epoch, endpoint (host, port) -> its partitions)
EndpointInformation = tuple[int, Mapping[tuple[str, int], EndpointPartitions]]


@dataclass(frozen=True)
class TaskHosts:
    """One version of the broker's endpoint information, by task (``"<sub>_<partition>"``)."""

    epoch: int
    active: dict[str, HostInfo]
    standby: dict[str, frozenset[HostInfo]]

    def active_host(self, task: str) -> HostInfo | None:
        """The host whose member runs ``task`` as active, None if none does."""
        return self.active.get(task)

    def standby_hosts(self, task: str) -> frozenset[HostInfo]:
        return self.standby.get(task, frozenset())


class GroupHosts:
    """Task -> hosts from the newest endpoint information any of the client's members heard.

    ``sources`` returns what each member heard last (None: nothing yet); the members of one
    client hear the same group, so the highest epoch is the newest view of it.
    """

    def __init__(
        self,
        plan: TopologyPlan,
        application_id: str,
        sources: Callable[[], Iterable[EndpointInformation | None]],
    ) -> None:
        self._sources = sources
        #: physical source topic (repartition topics included) -> its sub-topology id
        self._sub_of = {
            plan.physical_topic(topic, application_id): sub.id
            for sub in plan.subtopologies
            for topic in sub.source_topics
        }
        self._hosts: TaskHosts | None = None

    def current(self) -> TaskHosts | None:
        """The newest version, None until the broker has told any member the endpoints."""
        heard = [info for info in self._sources() if info is not None]
        if not heard:
            return None
        epoch, endpoints = max(heard, key=lambda info: info[0])
        cached = self._hosts
        if cached is not None and cached.epoch == epoch:
            return cached
        active: dict[str, HostInfo] = {}
        standby: dict[str, set[HostInfo]] = {}
        for (host, port), partitions in endpoints.items():
            info = HostInfo(host, port)
            for task in self._tasks(partitions.active):
                active[task] = info
            for task in self._tasks(partitions.standby):
                standby.setdefault(task, set()).add(info)
        hosts = TaskHosts(epoch, active, {task: frozenset(s) for task, s in standby.items()})
        self._hosts = hosts  # one reference swap: readers on other threads see one version
        return hosts

    def _tasks(self, partitions: Iterable[tuple[str, int]]) -> set[str]:
        """The tasks (``"<sub>_<partition>"``) behind source partitions; topics the plan does
        not read (another application's topology in the group) are skipped."""
        return {
            f"{self._sub_of[topic]}_{partition}" for topic, partition in partitions if topic in self._sub_of
        }
