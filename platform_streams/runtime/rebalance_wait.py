"""``AssignmentWait``: a worker that waits long for the group to assign it partitions says so.

Without it a client whose group never completes a rebalance sits in REBALANCING without a
word. On Apache Kafka a rebalance waits at most for the slowest member
(``max.poll.interval.ms``); on a broker with the group bug of docs/brokers.md a group whose
leader left or died at the wrong
moment never completes one, and no client can repair it through the group protocol (see
docs/brokers.md and tools/group_rejoin_probe.py). The warning names what an operator needs
to recognise that: the group, this member, its generation, the time waited.

After twice that time (plus jitter, so that the workers of one group do not all act at
once) the worker tries the one repair such a broker allows: :func:`repair_group` deletes the group
and puts its committed offsets back, then the worker rejoins with a fresh member. Apache
Kafka refuses to delete a group that has members (a rebalance slow enough to get here
has other members), so there the attempt only logs the refusal and rejoins -- and a
Kafka group cannot wedge this way in the first place.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError, StreamsError
from platform_streams.kafka import KafkaAdmin, group_membership

__all__ = ["AssignmentWait", "repair_group"]

log = logging.getLogger(__name__)

#: a worker waiting this long for an assignment says so (at least; else 3 session timeouts)
_WARNING_MIN_S = 30.0
#: writes of the committed offsets into a re-created group before giving up
_RESTORE_ATTEMPTS = 3


class AssignmentWait:
    """Tracks since when a worker waits for an assignment; warns every few session timeouts."""

    def __init__(self, worker_name: str, config: StreamsConfig) -> None:
        self.worker_name = worker_name
        self.group = config.application_id
        self.warning_s = max(_WARNING_MIN_S, 3 * config.session_timeout_ms / 1000.0)
        self.since: float | None = None
        self.warnings = 0
        self._next_warning = 0.0
        self._repair_at: float | None = None

    @property
    def waiting(self) -> bool:
        return self.since is not None

    def on_state(self, awaiting_assignment: bool) -> None:
        """The worker changed state: it now waits for an assignment, or it got one."""
        if awaiting_assignment:
            if self.since is None:
                self.since = time.monotonic()
                self._next_warning = self.since + self.warning_s
                self._repair_at = self.since + self.warning_s * (2 + random.random())
            return
        since, self.since = self.since, None
        if since is not None and self.warnings:
            log.warning(
                "%s: the group assigned partitions after %.0fs", self.worker_name, time.monotonic() - since
            )
        self.warnings = 0

    def repair_due(self) -> bool:
        """True once per wait, after two to three warning periods: time for :func:`repair_group`."""
        if self._repair_at is None or time.monotonic() < self._repair_at:
            return False
        self._repair_at = None
        return True

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
            "may be slow to rejoin, or the broker lost the group's leader mid-rebalance (some brokers "
            "never recover such a group; see docs/brokers.md)",
            self.worker_name,
            now - self.since,
            self.group,
            member or "(none yet)",
            generation if generation is not None and generation >= 0 else "(none yet)",
            state,
        )


def _read_offsets(
    admin: KafkaAdmin, group: str, partitions: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The group's committed offsets of ``partitions`` (those it has), read up to
    ``_RESTORE_ATTEMPTS`` times while none come back."""
    offsets: dict[tuple[str, int], int] = {}
    for attempt in range(_RESTORE_ATTEMPTS):
        try:
            read = admin.committed_offsets(group, partitions, 30.0)
        except StreamsError as exc:  # BrokerError, StreamsTimeoutError (a slow broker)
            log.debug("reading the committed offsets of %r: %s", group, exc)
            read = {}
        offsets = {tp: o for tp, o in read.items() if o is not None}
        if offsets or not partitions:
            break
        time.sleep(1.0 + attempt)
    return offsets


def repair_group(
    config: StreamsConfig, partitions: Sequence[tuple[str, int]], leave: Callable[[], None]
) -> None:
    """Delete the application's group and restore its committed offsets of ``partitions``.

    ``leave`` closes the caller's consumer (LeaveGroup) once the offsets are read: a member
    left in the group would be handed the re-created group while the offsets are not back
    yet. The caller then rejoins with a fresh member, which leads the re-created group.
    A broker may answer the offset restore by dropping the connection, usually after storing
    them, so they are read back (and written again) until they match; offsets that could
    not be restored are logged for an operator to set before records are read again.
    """
    group = config.application_id
    with KafkaAdmin(config.admin_configs()) as admin:
        offsets = _read_offsets(admin, group, partitions)
        if not offsets:
            # Nothing read back is not proof that nothing was committed (the soak run saw a
            # wedged group on the broker of docs/brokers.md answer no offsets at all, and the
            # re-created group then started over from auto.offset.reset: every record processed again, state
            # counted twice under at-least-once). Stay wedged and say so; never delete a
            # group's progress we could not save.
            log.error(
                "group %r did not rebalance, and none of its committed offsets of %d partitions could "
                "be read: not deleting it (a re-created group would start over from "
                "auto.offset.reset); rejoining",
                group,
                len(partitions),
            )
            leave()
            return
        leave()
        refused = admin.delete_group(group)
        if refused is not None:
            log.warning("group %r did not rebalance and the broker keeps it (%s): rejoining", group, refused)
            return
        restored: dict[tuple[str, int], int | None] = {}
        for _ in range(_RESTORE_ATTEMPTS):
            try:
                admin.alter_committed_offsets(group, offsets)
            except BrokerError as exc:
                log.debug("restoring the committed offsets of %r: %s (checking what was stored)", group, exc)
            restored = admin.committed_offsets(group, list(offsets), 30.0) if offsets else {}
            if restored == offsets:
                break
    if restored != offsets:
        log.error(
            "group %r re-created, but its committed offsets were not restored: they were %s", group, offsets
        )
        return
    log.warning(
        "group %r did not rebalance: deleted it (the only repair left), restored its committed "
        "offsets of %d partitions, rejoining with a fresh member",
        group,
        len(offsets),
    )
