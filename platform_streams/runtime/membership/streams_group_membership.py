"""A client's membership in a streams group (KIP-1071): the broker assigns the tasks.

On a broker with streams groups (StreamsGroupHeartbeat, probed through ApiVersions) the group
coordinator does what the control-topic protocol does elsewhere: it keeps the members, runs
the high-availability assignor (actives, standbys, warm-ups) and moves tasks incrementally.
This module turns a :class:`TopologyPlan` into the topology the heartbeat carries, runs the
heartbeat loop on a thread of its own, hands the caller each change of its tasks (revoked
first, then added: the order the broker relies on), and answers the two questions the commit
path asks: which member and epoch to name in an OffsetCommit (at-least-once), and the group
metadata a transactional producer sends (exactly-once).

The broker's status codes surface as Kafka Streams surfaces them (``StreamThread
.handleStreamsRebalanceData``): INCORRECTLY_PARTITIONED_TOPICS fails the client with a
topology error; MISSING_SOURCE_TOPICS fails it after two heartbeat intervals;
SHUTDOWN_APPLICATION calls the client's shutdown hook.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from platform_streams.errors import MissingSourceTopicError, StreamsError, TaskMigratedError, TopologyError
from platform_streams.kafka.streams_group import StreamsGroupClient, group_metadata
from platform_streams.kafka.streams_group.member import (
    Assignment,
    EndpointPartitions,
    HeartbeatOutcome,
    InternalTopicSpec,
    StreamsGroupRefused,
    StreamsMember,
    SubtopologySpec,
    TopologySpec,
)
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["StreamsGroupMembership", "TaskChange", "topology_spec"]

log = logging.getLogger(__name__)

#: Kafka Streams' ``InternalTopicConfig.INTERNAL_TOPIC_DEFAULT_OVERRIDES``
_INTERNAL_TOPIC_DEFAULTS = {"message.timestamp.type": "CreateTime"}

#: (revoked, added): the tasks to stop, then the tasks to start
TaskChange = Callable[[Assignment, Assignment], None]


def topology_spec(plan: TopologyPlan, application_id: str, replication_factor: int = -1) -> TopologySpec:
    """The plan as StreamsGroupHeartbeat's topology: sub-topology ids are the plan's indexes
    (the ``<sub>_<partition>`` task ids both sides use), internal topics by physical name.

    The internal topics are described as Kafka Streams describes them
    (``StreamThread.initBrokerTopology``): the configured replication factor and the topic
    configs with Kafka's internal-topic default (``message.timestamp.type=CreateTime``), sorted
    by key. The broker keeps the first topology a group is given and refuses a different one
    ("Topology updates are not supported yet"), so a description that differed from Java's
    in any field would keep this client out of a group a Java instance started.
    """

    def topic(name: str, partitions: int = 0) -> InternalTopicSpec:
        configs = {**_INTERNAL_TOPIC_DEFAULTS, **dict(internal[name].config)}
        return InternalTopicSpec(
            plan.physical_topic(name, application_id),
            partitions,
            replication_factor,
            tuple(sorted(configs.items())),
        )

    subs = []
    internal = plan.internal_topics
    for sub in plan.subtopologies:
        repartition_sources = tuple(
            topic(t, internal[t].num_partitions or 0) for t in sub.source_topics if t in internal
        )
        changelogs = []
        for store in sub.stores:
            logical = plan.changelog_topic(store)
            if logical is not None and logical in internal:
                changelogs.append(topic(logical))
        groups = []
        for declared in plan.topology.copartition_groups:
            topics = {
                plan.physical_topic(t, application_id) for name in declared for t in plan.pattern_topics(name)
            }
            mine = tuple(
                sorted(
                    t
                    for t in topics
                    if t in {plan.physical_topic(s, application_id) for s in sub.source_topics}
                )
            )
            if len(mine) > 1:
                groups.append(mine)
        subs.append(
            SubtopologySpec(
                id=str(sub.id),
                source_topics=tuple(t for t in sub.source_topics if t not in internal),
                repartition_sources=repartition_sources,
                repartition_sinks=tuple(
                    plan.physical_topic(t, application_id) for t in sub.sink_topics if t in internal
                ),
                changelogs=tuple(changelogs),
                copartition_groups=tuple(groups),
            )
        )
    return TopologySpec(epoch=0, subtopologies=tuple(subs))


class StreamsGroupMembership:
    """The heartbeat thread of one client in a streams group (see the module docstring)."""

    def __init__(
        self,
        bootstrap: str,
        application_id: str,
        topology: TopologySpec,
        *,
        process_id: str,
        on_change: TaskChange | None = None,
        on_shutdown_request: Callable[[], None] | None = None,
        on_failure: Callable[[StreamsError], None] | None = None,
        endpoint: tuple[str, int] | None = None,
        client_tags: Mapping[str, str] | None = None,
        client_id: str = "platform-streams",
        security: Mapping[str, str] | None = None,
    ) -> None:
        self.application_id = application_id
        self.client = StreamsGroupClient(bootstrap, application_id, client_id=client_id, security=security)
        self.member = StreamsMember(
            self.client, topology, process_id=process_id, endpoint=endpoint, client_tags=client_tags
        )
        self._on_change = on_change
        self._on_shutdown_request = on_shutdown_request
        self._on_failure = on_failure
        self._stop = threading.Event()
        self._missing_since: float | None = None
        self._ack_now = False
        self._wake = threading.Event()
        #: without ``on_change``: the target the worker has yet to apply, and whether the
        #: broker fenced this member since the worker last looked (its tasks are lost)
        self._target: Assignment | None = None
        self._lost = False
        self._changes = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"{application_id}-streams-group", daemon=True)
        #: the last outcome: member epoch, statuses (what /state shows)
        self.last: HeartbeatOutcome | None = None
        self.failure: StreamsError | None = None
        self.shutdown_requested = False
        #: how often the broker dropped this member (its tasks lost, joined again)
        self.fenced = 0
        #: heartbeats answered, and when the last answer came (monotonic)
        self.heartbeats = 0
        self._answered_at = time.monotonic()
        #: the broker's latest endpoint information (epoch, endpoint -> partitions) for
        #: interactive queries; replaced whole, so readers on other threads see one version
        self.endpoints: tuple[int, dict[tuple[str, int], EndpointPartitions]] | None = None

    # -- the commit path --------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        return self.member.member_id

    @property
    def member_epoch(self) -> int:
        return self.member.member_epoch

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """At-least-once: OffsetCommit v9 naming this member at its epoch (a stale epoch is
        refused with STALE_MEMBER_EPOCH, so a fenced member cannot commit over the new owner)."""
        member_id, epoch = self.member.member_id, self.member.member_epoch
        self._refuse_if_lost()  # after reading the epoch: a new one means the loss is flagged
        self.client.commit(member_id, epoch, offsets)

    def group_metadata(self) -> bytes:
        """Exactly-once: what ``send_offsets_to_transaction`` takes, naming this member at its
        epoch; the coordinator refuses the TxnOffsetCommit of a stale epoch."""
        metadata = group_metadata(self.application_id, self.member.member_id, self.member.member_epoch)
        self._refuse_if_lost()
        return metadata

    def verify_membership(self, wait_s: float = 10.0) -> None:
        """Before a commit writes anything: refuse (TaskMigratedError) if the broker dropped
        this member.

        The heartbeat thread learns of a drop only from its next answer. After this process
        was paused past the session (a stopped process, a long GC-like stall) the worker
        resumes at once and its commit would flush the tasks' caches -- changelog and output
        records of state the new owner has moved past -- before the offset commit is refused.
        So when no heartbeat was answered for two intervals, the commit first waits (up to
        ``wait_s``) for a fresh answer.
        """
        if self.overdue() and self._thread.is_alive():
            seen, deadline = self.heartbeats, time.monotonic() + wait_s
            self._wake.set()
            while self.heartbeats == seen and time.monotonic() < deadline and not self._stop.is_set():
                time.sleep(0.01)
        self._refuse_if_lost()

    def overdue(self) -> bool:
        """Whether no heartbeat was answered for two intervals (at least a second): this
        process may have been paused past its session, or the broker is away."""
        interval = self.last.interval_s if self.last is not None else 0.5
        return time.monotonic() - self._answered_at > max(2 * interval, 1.0)

    def verify_before_processing(self) -> None:
        """Before the worker processes records: :meth:`verify_membership` when a heartbeat is
        overdue, else only refuse if a drop was heard.

        Why: a process resumed after a pause past its session holds records fetched before
        the pause. Processing them writes changelog records after those of the tasks' new
        owner -- older state that a later restore applies last (at-least-once has no
        fencing). Records already being processed when the pause came are still written;
        exactly-once aborts them."""
        if self.overdue():
            self.verify_membership()
        elif self._lost:
            self._refuse_if_lost()

    def _refuse_if_lost(self) -> None:
        """The broker checks a commit's epoch only, not who owns the tasks, and the heartbeat
        thread joins again at once after the member was dropped: until the worker has taken
        the loss (:meth:`take_lost`, its tasks closed uncommitted), the new epoch must not
        carry the lost tasks' offsets (or their transaction) over their new owner's."""
        with self._changes:
            lost = self._lost
        if lost:
            raise TaskMigratedError(
                f"{self.application_id}: the streams group dropped this member; its tasks are lost"
            )

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def heartbeat_once(self) -> HeartbeatOutcome:
        """One heartbeat and its consequences (the loop's body; tests drive it directly)."""
        outcome = self.member.heartbeat()
        self.last = outcome
        self._answered_at = time.monotonic()
        if outcome.rejoined:
            self.fenced += 1
            log.warning(
                "%s: the broker fenced this member; its tasks are lost, joining again", self.application_id
            )
            if self._on_change is None:
                with self._changes:
                    self._lost, self._target = True, None
            else:
                self._on_change(self.member.owned, Assignment())
        if outcome.endpoints is not None:
            self.endpoints = (outcome.endpoints_epoch, outcome.endpoints)
        self._check_statuses(outcome)
        if outcome.assignment is not None:
            self._apply(outcome.assignment)
        self.heartbeats += 1
        return outcome

    def _apply(self, target: Assignment) -> None:
        if self._on_change is None:
            with self._changes:
                self._target = target
            return
        revoked, added = _difference(self.member.owned, target)
        if revoked != Assignment() or added != Assignment():
            self._on_change(revoked, added)
            # the broker hands revoked tasks to their new owners only once this member says it
            # let them go: say so now, not an interval later (Kafka's client does the same)
            self._ack_now = True
        self.member.acknowledge(target)

    def take_lost(self) -> bool:
        """Whether the broker fenced this member since the last look (its tasks are gone:
        close them without committing)."""
        with self._changes:
            lost, self._lost = self._lost, False
            return lost

    def take_change(self) -> tuple[Assignment, Assignment, Assignment] | None:
        """The broker's latest target not yet applied: (target, revoked, added) against what
        this member owns; the caller stops the revoked tasks, starts the added ones, then
        calls :meth:`applied`. None when nothing changed."""
        with self._changes:
            target, self._target = self._target, None
        if target is None:
            return None
        revoked, added = _difference(self.member.owned, target)
        return target, revoked, added

    def applied(self, target: Assignment) -> None:
        """The caller now runs ``target``: report it at once (the broker hands the revoked
        tasks to their new owners only after this)."""
        self.member.acknowledge(target)
        self._wake.set()

    def _check_statuses(self, outcome: HeartbeatOutcome) -> None:
        missing = None
        for name, detail in outcome.statuses:
            if name == "SHUTDOWN_APPLICATION" and not self.shutdown_requested:
                self.shutdown_requested = True
                if self._on_shutdown_request is not None:
                    self._on_shutdown_request()
            elif name == "INCORRECTLY_PARTITIONED_TOPICS":
                raise TopologyError(detail)
            elif name == "MISSING_SOURCE_TOPICS":
                missing = detail
        if missing is None:
            self._missing_since = None
            return
        now = time.monotonic()
        if self._missing_since is None:
            self._missing_since = now
            log.info("%s: missing source topics: %s", self.application_id, missing)
        elif now - self._missing_since >= 2 * max(outcome.interval_s, 0.05):
            raise MissingSourceTopicError(
                f"Missing source topics: {missing}. Timeout exceeded after "
                f"{int((now - self._missing_since) * 1000)}ms."
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._ack_now = False
                outcome = self.heartbeat_once()
                wait = 0.0 if self._ack_now else outcome.interval_s
            except StreamsError as exc:
                if isinstance(exc, (TopologyError, StreamsGroupRefused)):
                    self.failure = exc
                    if self._on_failure is not None:
                        self._on_failure(exc)
                    return
                log.warning("%s: streams-group heartbeat failed: %s", self.application_id, exc)
                wait = 1.0
            self._wake.wait(wait)
            self._wake.clear()

    def view(self) -> dict[str, Any]:
        """What ``/state`` shows: this member, and the broker's view of its group (one
        StreamsGroupDescribe; "unknown" with the reason when the broker does not answer)."""
        last = self.last
        view: dict[str, Any] = {
            "group_id": self.application_id,
            "member_id": self.member.member_id,
            "member_epoch": self.member.member_epoch,
            "statuses": [f"{name}: {detail}" for name, detail in last.statuses] if last else [],
            "fenced": self.fenced,
        }
        try:
            group = self.client.describe()
        except StreamsError as exc:
            return {**view, "group_state": f"unknown ({exc})"}
        return {
            **view,
            "group_state": group.group_state,
            "group_epoch": int(group.group_epoch),
            "assignment_epoch": int(group.assignment_epoch),
            "members": len(group.members),
        }

    def request_shutdown(self) -> None:
        """Ask every client of the application to stop (SHUTDOWN_APPLICATION): the flag rides
        on the next heartbeat, sent now."""
        self.member.request_shutdown()
        self._wake.set()

    def close(self, *, leave: bool = True) -> None:
        """Stop heartbeating; ``leave``: epoch -1, the tasks go to the others at once."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            if (
                self.member.shutdown_requested
                and not self.member.shutdown_sent
                and self.member.member_epoch > 0
            ):
                self.member.heartbeat()  # the broker takes the flag from a member, not from a leave
            if leave:
                self.member.leave()
        except StreamsError as exc:
            log.warning("%s: leaving the streams group failed: %s", self.application_id, exc)
        finally:
            self.client.close()


def _difference(owned: Assignment, target: Assignment) -> tuple[Assignment, Assignment]:
    """(revoked, added): what ``owned`` has that ``target`` has not, and the other way round."""
    revoked = Assignment(
        owned.active - target.active, owned.standby - target.standby, owned.warmup - target.warmup
    )
    added = Assignment(
        target.active - owned.active, target.standby - owned.standby, target.warmup - owned.warmup
    )
    return revoked, added
