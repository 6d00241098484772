"""``LeaveGuard``: a stopping worker does not leave its group in the middle of a rebalance
on a broker whose coordinator keeps a departed leader.

On such a broker (the embedded one, docs/brokers.md) only the member recorded as the
group's leader can end a rebalance, and a leader that leaves (LeaveGroup) while the group
rebalances stays recorded as its leader: the group never completes another rebalance, and
the next start of the application waits for the group repair (runtime/membership/rebalance_wait.py,
tens of seconds). It happens on the most common stop there is: one worker of
``run --workers N`` fails (a poison record), its leave starts a rebalance, and the
supervisor stops the surviving worker -- the leader -- while it rejoins.

So where the coordinator does not elect a new leader
(:func:`~platform_streams.runtime.broker_features.elects_new_group_leader`, asked once per
process in the background when a worker first gets an assignment, :meth:`LeaveGuard.joined`;
a stop before the answer came does not wait), a stopping
worker keeps serving the group -- polling, processing nothing -- until it is not waiting
for an assignment and one heartbeat interval has passed without a new rebalance (the
heartbeat is how the coordinator tells a member that another one left), at most
``1.5 x session.timeout.ms`` plus that interval. The worker commits (under exactly-once:
its transaction) and closes its tasks before it serves, and an assignment that arrives
meanwhile starts nothing (runtime/workers/worker.py). A worker that was the only member of its
last generation and is not rebalancing leaves at once (nobody can have left; a newcomer
joining at that very moment is the one case left to the repair); only the state-aware
coordinator knows the members of a generation, so under the range assignor no worker is
taken as alone. A leader that leaves a
group which completed its rebalance is forgotten correctly, and the next start is as quick
as a first one. On Apache Kafka the worker leaves at once.
"""

from __future__ import annotations

import logging
import threading
import time

from platform_streams.config import StreamsConfig
from platform_streams.runtime.broker_features import (
    known_elects_new_group_leader,
    probe_group_leader_election,
)

__all__ = ["LeaveGuard"]

log = logging.getLogger(__name__)

#: beyond one heartbeat interval: the heartbeat's round trip and the rejoin it triggers
_HEARTBEAT_MARGIN_S = 0.25


class LeaveGuard:
    """Asked by a stopping worker, each loop: keep serving the group before leaving it?"""

    def __init__(self, worker_name: str, config: StreamsConfig) -> None:
        self.worker_name = worker_name
        self._config = config
        self.quiet_s = config.heartbeat_interval_ms / 1000.0 + _HEARTBEAT_MARGIN_S
        self.bound_s = 1.5 * config.session_timeout_ms / 1000.0 + self.quiet_s
        self._active: bool | None = None
        self._since = 0.0
        self._quiet_until: float | None = None
        self._rebalance_seen = False
        self._awaiting = False

    def joined(self) -> threading.Thread | None:
        """The worker has an assignment: have the broker probed, in the background, unless it
        was (the thread that asks, for tests)."""
        return probe_group_leader_election(self._config)

    def hold(self, awaiting_assignment: bool, alone: bool) -> bool:
        """True while the worker should go on serving the group (it was asked to stop).

        ``alone``: this worker was the only member of its last generation; no other member
        can have left it, so a worker that is not rebalancing leaves at once.
        """
        now = time.monotonic()
        if self._active is None:
            self._since = now
            if alone and not awaiting_assignment:
                self._active = False
                return False
            # only the answer at hand: a stop never waits for the broker (no answer: no wait)
            self._active = known_elects_new_group_leader(self._config) is False
        if not self._active:
            return False
        if now - self._since >= self.bound_s:
            log.warning(
                "%s: leaving group %r after waiting %.0fs for its rebalance to end; on this broker "
                "the group may then need the repair at the next start (docs/brokers.md)",
                self.worker_name,
                self._config.application_id,
                now - self._since,
            )
            self._active = False
            return False
        if awaiting_assignment:
            if not self._rebalance_seen:
                log.info(
                    "%s: stopping; the group %r rebalances: finishing the rebalance before leaving "
                    "(the coordinator keeps a leader that leaves mid-rebalance)",
                    self.worker_name,
                    self._config.application_id,
                )
            self._rebalance_seen = True
            self._awaiting = True
            return True
        if self._quiet_until is None or self._awaiting:  # stopped, or just assigned
            self._awaiting = False
            self._quiet_until = now + self.quiet_s
        if now >= self._quiet_until:
            self._active = False
            if self._rebalance_seen:
                log.info(
                    "%s: the rebalance ended %.1fs after the stop; leaving group %r",
                    self.worker_name,
                    now - self._since,
                    self._config.application_id,
                )
            return False
        return True
