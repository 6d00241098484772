"""``AssignmentWait``: a worker that waits long for the group to assign it partitions says so.

Without it a client whose group never completes a rebalance sits in REBALANCING without a
word. On Apache Kafka a rebalance waits at most for the slowest member
(``max.poll.interval.ms``); on Tansu 0.6.0 a group whose leader left or died at the wrong
moment never completes one, and no client can repair it through the group protocol (see
docs/brokers.md and tools/group_rejoin_probe.py). The warning names what an operator needs
to recognise that: the group, this member, its generation, the time waited.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.kafka import group_membership

__all__ = ["AssignmentWait"]

log = logging.getLogger(__name__)

#: a worker waiting this long for an assignment says so (at least; else 3 session timeouts)
_WARNING_MIN_S = 30.0


class AssignmentWait:
    """Tracks since when a worker waits for an assignment; warns every few session timeouts."""

    def __init__(self, worker_name: str, config: StreamsConfig) -> None:
        self.worker_name = worker_name
        self.group = config.application_id
        self.warning_s = max(_WARNING_MIN_S, 3 * config.session_timeout_ms / 1000.0)
        self.since: float | None = None
        self.warnings = 0
        self._next_warning = 0.0

    @property
    def waiting(self) -> bool:
        return self.since is not None

    def on_state(self, awaiting_assignment: bool) -> None:
        """The worker changed state: it now waits for an assignment, or it got one."""
        if awaiting_assignment:
            if self.since is None:
                self.since = time.monotonic()
                self._next_warning = self.since + self.warning_s
            return
        since, self.since = self.since, None
        if since is not None and self.warnings:
            log.warning(
                "%s: the group assigned partitions after %.0fs", self.worker_name, time.monotonic() - since
            )
        self.warnings = 0

    def warn_if_long(self, consumer: Any, state: str) -> None:
        """Called from the worker's loop while it waits: warn once per ``warning_s``."""
        now = time.monotonic()
        if self.since is None or now < self._next_warning or consumer is None:
            return
        self._next_warning = now + self.warning_s
        self.warnings += 1
        member, generation = group_membership(consumer)
        log.warning(
            "%s: no partitions assigned after waiting %.0fs for group %r to rebalance (member %s, "
            "generation %s, state %s). The group coordinator has not completed the rebalance: a member "
            "may be slow to rejoin, or the broker lost the group's leader mid-rebalance (Tansu 0.6.0 "
            "never recovers such a group; see docs/brokers.md)",
            self.worker_name,
            now - self.since,
            self.group,
            member or "(none yet)",
            generation if generation is not None and generation >= 0 else "(none yet)",
            state,
        )
