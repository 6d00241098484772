"""``AssignmentWait``: a worker that waits long for the group to assign it partitions says so,
and repairs the group when it has evidence the group is wedged, not merely slow.

Without it a client whose group never completes a rebalance sits in REBALANCING without a
word. On Apache Kafka a rebalance waits at most for the slowest member
(``max.poll.interval.ms``, the rebalance timeout) and a member that died is expired after
``session.timeout.ms``; on a broker with the group bug of docs/brokers.md a group whose
leader left or died at the wrong moment never completes one, and no client can repair it
through the group protocol (see docs/brokers.md and tools/group_rejoin_probe.py). The
warning names what an operator needs to recognise that: the group, this member, its
generation, the time waited.

The repair (:func:`repair_group`: save the committed offsets, delete the group, put them
back) is destructive, so it acts only on a wedge, never on a slow rebalance (the soak run,
docs/soak/README.md, saw ordinary rebalances take 53-109 s on a loaded machine, and a
repair by timing alone then fired as a false alarm, on two workers at once, and made the
group re-read its input). While it waits, the worker looks at the group every session
timeout (:class:`GroupObservation`: its own generation, the group's described state and
members, the committed offsets of its source partitions). The group counts as wedged only
when that observation stayed the same, in a rebalancing state, for longer than any
legitimate rebalance can last (the rebalance timeout plus a session timeout, plus jitter so
that one worker acts first and the others see the group change and stand back). A broker
that lists the group's members (Apache Kafka) elects a new leader itself: once the process
knows that (``elects_new_group_leader``, :mod:`~platform_streams.runtime.broker_features`),
the group is not looked at and no saved offsets are read. A member whose generation moves,
a group that becomes STABLE, offsets that advance (somebody holds partitions and commits)
all restart the clock.

Before deleting, the offsets are saved in a second group, ``<application_id>-offsets-backup``
(:func:`backup_group`), and a worker whose assignment has no committed offset for a
partition starts from the saved one (:func:`fill_from_backup`), never from
``auto.offset.reset``. Nothing is written back into the re-created group (its members may
have committed newer offsets already): a member that joins it at any time cannot re-read
committed input. The reset tool deletes the backup group with the offsets.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsError
from platform_streams.kafka import KafkaAdmin, group_membership
from platform_streams.runtime.broker_features import elects_new_group_leader, group_repair_needed

__all__ = [
    "AssignmentWait",
    "GroupObservation",
    "backup_group",
    "fill_from_backup",
    "observe_group",
    "repair_group",
]

log = logging.getLogger(__name__)

TP = tuple[str, int]

#: the period the group is first looked at after (at least; else 3 session timeouts)
_WARNING_MIN_S = 30.0
#: a worker waiting this long for an assignment says so, what for and for how long at most
#: (a first join on the embedded broker takes ~session.timeout.ms / 2: 23 s by default)
_NOTICE_AFTER_S = 5.0
#: ... and says so again at most this often while it waits
_NOTICE_EVERY_S = 30.0
#: the group is looked at at most this often while a worker waits (else every session timeout)
_CHECK_MIN_S = 5.0
#: reads of the committed offsets before giving up
_READ_ATTEMPTS = 3
#: group states in which a group is not wedged: it completed a rebalance, or has nobody
_SETTLED_STATES = frozenset({"STABLE", "EMPTY", "DEAD"})


def backup_group(application_id: str) -> str:
    """The group that keeps the committed offsets a repair saved (never joined by anyone;
    only ever written by :func:`repair_group`, read by :func:`fill_from_backup`)."""
    return f"{application_id}-offsets-backup"


@dataclass(frozen=True)
class GroupObservation:
    """What a waiting worker sees of its group; the same observation for longer than a
    rebalance can last is a wedge (module docstring)."""

    generation: int | None
    state: str
    members: int
    offsets: tuple[tuple[TP, int], ...]

    @property
    def committed(self) -> dict[TP, int]:
        return dict(self.offsets)


class AssignmentWait:
    """Tracks since when a worker waits for an assignment; warns, and judges a wedge."""

    def __init__(self, worker_name: str, config: StreamsConfig) -> None:
        self.worker_name = worker_name
        self.group = config.application_id
        self._config = config
        session_s = config.session_timeout_ms / 1000.0
        self.warning_s = max(_WARNING_MIN_S, 3 * session_s)
        self.check_s = max(_CHECK_MIN_S, session_s)
        #: the longest a legitimate rebalance takes: every member has the rebalance timeout
        #: (max.poll.interval.ms) to rejoin; one that died is expired after a session timeout
        self.wedged_after_s = config.max_poll_interval_ms / 1000.0 + session_s
        #: state-aware placement: a member that has not reported this long after the group
        #: assigned (reports take milliseconds) is left out by the leader; well before the
        #: unplaced members give up on the generation (``wedged_after_s``)
        self.partial_after_s = max(session_s, min(self.warning_s, self.wedged_after_s) / 2)
        self.session_s = session_s
        #: the latest a wedged group is repaired: first looked at, unchanged for longer than a
        #: rebalance plus the jitter, seen at the next check
        self.repaired_within_s = (
            min(self.warning_s, self.wedged_after_s) + self.wedged_after_s + self.warning_s + self.check_s
        )
        self.since: float | None = None
        self.warnings = 0
        self._next_warning = 0.0
        self._next_check = 0.0
        self._seen: GroupObservation | None = None
        self._seen_since = 0.0
        self._jitter_s = 0.0
        #: the coordinator's count of re-creations at the last look (None: not looked yet;
        #: the control topic's history of earlier runs is in the first count)
        self._recreations: int | None = None

    @property
    def waiting(self) -> bool:
        return self.since is not None

    def on_state(self, awaiting_assignment: bool) -> None:
        """The worker changed state: it now waits for an assignment, or it got one."""
        if awaiting_assignment:
            if self.since is None:
                self.since = time.monotonic()
                self._next_warning = self.since + _NOTICE_AFTER_S
                self._next_check = self.since + min(self.warning_s, self.wedged_after_s)
                self._seen = None
                # one worker of a wedged group acts first; the others see the group change
                self._jitter_s = random.random() * self.warning_s
            return
        since, self.since = self.since, None
        self._seen = None
        if since is not None and self.warnings:
            log.warning(
                "%s: the group assigned partitions after %.0fs", self.worker_name, time.monotonic() - since
            )
        self.warnings = 0

    def check_due(self) -> bool:
        """True every ``check_s`` while the worker waits (after the first period): time to
        :func:`observe_group` and pass the result to :meth:`wedged`."""
        now = time.monotonic()
        if self.since is None or now < self._next_check:
            return False
        self._next_check = now + self.check_s
        return group_repair_needed(self._config)

    def wedged(self, seen: GroupObservation, recreations: int = 0) -> bool:
        """True when ``seen`` has not changed for longer than any legitimate rebalance lasts.

        A group that lists members (a broker whose coordinator elects a new leader itself)
        or that is settled (STABLE, EMPTY) is not wedged; any change of generation, state
        or committed offsets restarts the clock, and so does a repair by any member
        (``recreations``, the count of group re-creations this client has read): the
        re-created group is new, and a second repair while its members join it (leaving
        mid-rebalance) wedges it again. True once per unchanged stretch.
        """
        now = time.monotonic()
        if recreations != self._recreations:
            first_look, self._recreations = self._recreations is None, recreations
            if not first_look:
                self._seen, self._seen_since = seen, now
                return False
        if seen.members or seen.state in _SETTLED_STATES:
            self._seen = None
            return False
        if seen != self._seen:
            self._seen, self._seen_since = seen, now
            return False
        if now - self._seen_since < self.wedged_after_s + self._jitter_s:
            return False
        self._seen = None
        return True

    def warn_if_long(self, consumer: Any, state: str) -> None:
        """Called from the worker's loop while it waits: warn after ``_NOTICE_AFTER_S``, then
        at most every ``_NOTICE_EVERY_S``, saying what it waits for and how long at most."""
        now = time.monotonic()
        if self.since is None or now < self._next_warning or consumer is None:
            return
        self._next_warning = now + _NOTICE_EVERY_S
        self.warnings += 1
        member, generation = group_membership(consumer)
        log.warning(
            "%s: no partitions assigned after waiting %.0fs for group %r to rebalance (member %s, "
            "generation %s, state %s). It waits for every member to rejoin: at most %.0fs "
            "(max.poll.interval.ms + session.timeout.ms; a member that died is expired after "
            "session.timeout.ms), and the embedded broker holds each join ~%.0fs "
            "(session.timeout.ms / 2). A group that stays unchanged for longer lost its leader "
            "mid-rebalance: it is repaired within ~%.0fs of waiting (see docs/brokers.md)",
            self.worker_name,
            now - self.since,
            self.group,
            member or "(none yet)",
            generation if generation is not None and generation >= 0 else "(none yet)",
            state,
            self.wedged_after_s,
            self.session_s / 2,
            self.repaired_within_s,
        )


def _read_offsets(admin: KafkaAdmin, group: str, partitions: Sequence[TP]) -> dict[TP, int]:
    """The group's committed offsets of ``partitions`` (those it has), read up to
    ``_READ_ATTEMPTS`` times while none come back."""
    offsets: dict[TP, int] = {}
    for attempt in range(_READ_ATTEMPTS):
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


def observe_group(
    config: StreamsConfig, partitions: Sequence[TP], generation: int | None
) -> GroupObservation:
    """Describe the application's group and read its committed offsets of ``partitions``."""
    group = config.application_id
    with KafkaAdmin(config.admin_configs()) as admin:
        description = admin.describe_group(group, timeout=30.0)
        offsets = admin.committed_offsets(group, partitions, 30.0)
    return GroupObservation(
        generation,
        description.state,
        len(description.members),
        tuple(sorted((tp, o) for tp, o in offsets.items() if o is not None)),
    )


def _write_checked(admin: KafkaAdmin, group: str, offsets: Mapping[TP, int]) -> bool:
    """Write ``offsets`` into ``group`` and read them back (a broker may answer the write by
    dropping the connection after storing them); True when they are stored."""
    for _ in range(_READ_ATTEMPTS):
        try:
            admin.alter_committed_offsets(group, offsets)
        except StreamsError as exc:  # BrokerError, StreamsTimeoutError: maybe stored all the same
            log.debug("writing the committed offsets of %r: %s (checking what was stored)", group, exc)
        try:
            stored = admin.committed_offsets(group, list(offsets), 30.0)
        except StreamsError as exc:
            log.debug("reading back the committed offsets of %r: %s", group, exc)
            continue
        if all(stored.get(tp) == o for tp, o in offsets.items()):
            return True
    return False


def _save(admin: KafkaAdmin, group: str, offsets: Mapping[TP, int]) -> bool:
    """Keep ``offsets`` in the backup group; an offset saved before is only ever raised
    (committed offsets move forward), so a repair never puts a partition back."""
    backup = backup_group(group)
    saved = admin.committed_offsets(backup, list(offsets), 30.0)
    merged = {tp: max(o, saved.get(tp) or 0) for tp, o in offsets.items()}
    return _write_checked(admin, backup, merged)


def repair_group(
    config: StreamsConfig,
    partitions: Sequence[TP],
    seen: GroupObservation,
    leave: Callable[[], None],
    on_deleted: Callable[[], None] | None = None,
    superseded: Callable[[], bool] = lambda: False,
) -> None:
    """Repair a group :meth:`AssignmentWait.wedged` judged wedged: save its committed offsets
    of ``partitions`` in the backup group, then delete it.

    ``leave`` closes the caller's consumer (LeaveGroup); the caller then rejoins with a
    fresh member, which leads the re-created group. The offsets are read once more after
    leaving: if they moved since ``seen``, a member holds partitions and commits, the group
    is not wedged, and nothing is deleted. They are saved (:func:`backup_group`) before the
    delete, and every member of the re-created group starts a partition it has no committed
    offset for from the saved one (:func:`fill_from_backup`). They are deliberately not
    written back into the re-created group: its members may already have joined and
    committed newer offsets (the soak saw them join within 2 s of the delete), and a
    write-back would move those back. Instead each member commits the saved offsets of its
    own partitions at its next commit (``StreamTask.recommit``), input or not.
    ``on_deleted`` is called once the group is deleted (state-aware placement: the old
    group's assignments become void, ``AssignmentCoordinator.group_recreated``).

    Before leaving, the group is looked at once more, and ``superseded`` (another member's
    repair was read since ``seen``) is asked: two members that judge the same group wedged
    within one check of each other must not both act. The second one's leave would come
    while the first one's re-created group forms -- its consumer may already have rejoined
    and lead it -- and a leader leaving mid-rebalance wedges the new group again.
    """
    group = config.application_id
    offsets = seen.committed
    with KafkaAdmin(config.admin_configs()) as admin:
        if superseded() or _offsets_now(admin, group, partitions) != offsets:
            log.warning(
                "group %r did not rebalance, but it changed since it was looked at (another member "
                "repaired it, or its committed offsets moved): not repairing it; waiting on",
                group,
            )
            return
        if not offsets and _saved(admin, group, partitions):
            # A group re-created by an earlier repair that wedged again before any member
            # committed: its progress is the saved offsets, which the members start from;
            # deleting it loses nothing (the 60-minute soak run stayed wedged here).
            leave()
            _delete_wedged(admin, group, seen, len(partitions), on_deleted)
            return
        if not offsets:
            # Nothing read back is not proof that nothing was committed (the soak run saw a
            # wedged group answer no offsets at all). Never delete progress we could not save.
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
        now = _read_offsets(admin, group, partitions)
        if now != offsets:
            log.warning(
                "group %r did not rebalance, but its committed offsets moved (a member holds partitions): "
                "not deleting it; rejoining",
                group,
            )
            return
        if not _save(admin, group, offsets):
            log.error(
                "group %r did not rebalance; its committed offsets could not be saved: not deleting it", group
            )
            return
        _delete_wedged(admin, group, seen, len(offsets), on_deleted)


def _offsets_now(admin: KafkaAdmin, group: str, partitions: Sequence[TP]) -> dict[TP, int] | None:
    """One read of the group's committed offsets (None: unreadable, which is a change)."""
    try:
        read = admin.committed_offsets(group, partitions, 30.0)
    except StreamsError as exc:
        log.debug("reading the committed offsets of %r: %s", group, exc)
        return None
    return {tp: o for tp, o in read.items() if o is not None}


def _saved(admin: KafkaAdmin, group: str, partitions: Sequence[TP]) -> bool:
    """True if a repair saved offsets of any of ``partitions``."""
    try:
        saved = admin.committed_offsets(backup_group(group), partitions, 30.0)
    except StreamsError:
        return False
    return any(o is not None for o in saved.values())


def _delete_wedged(
    admin: KafkaAdmin,
    group: str,
    seen: GroupObservation,
    saved: int,
    on_deleted: Callable[[], None] | None,
) -> None:
    refused = admin.delete_group(group)
    if refused is not None:
        log.warning("group %r did not rebalance and the broker keeps it (%s): rejoining", group, refused)
        return
    if on_deleted is not None:
        on_deleted()
    log.warning(
        "group %r did not rebalance (generation %s, state %s and its committed offsets unchanged for "
        "longer than the rebalance timeout): saved its committed offsets of %d partitions in group %r, "
        "deleted it (the only repair left), rejoining with a fresh member; members of the re-created "
        "group start from the saved offsets until they commit their own",
        group,
        seen.generation,
        seen.state,
        saved,
        backup_group(group),
    )


def fill_from_backup(
    config: StreamsConfig, committed: Mapping[TP, int | None], worker_name: str
) -> dict[TP, int | None]:
    """``committed`` with a repair's saved offset (:func:`backup_group`) wherever the group has none.

    Kafka Streams treats a partition without a committed offset as new and applies the reset
    policy; after a repair deleted the group that is no longer true, and reading from
    ``auto.offset.reset`` would process committed input again. Without missing offsets (every
    rebalance of a running application) this costs nothing; with some (a first start), one
    offsets read of the backup group -- none where the coordinator elects a new leader
    itself (Apache Kafka: no group is ever repaired there; one DescribeGroups per process
    finds out).
    """
    missing = [tp for tp, o in committed.items() if o is None]
    if missing and group_repair_needed(config):
        elects_new_group_leader(config)  # asked once per process; no answer keeps the read
    if not missing or not group_repair_needed(config):
        return dict(committed)
    try:
        with KafkaAdmin(config.admin_configs()) as admin:
            saved = admin.committed_offsets(backup_group(config.application_id), missing, 30.0)
    except StreamsError as exc:
        raise StreamsError(
            f"could not read the offsets a group repair saved for {len(missing)} partitions without a "
            f"committed offset ({exc}); not starting them from auto.offset.reset"
        ) from exc
    found = {tp: o for tp, o in saved.items() if o is not None}
    if found:
        log.warning(
            "%s: %d partitions have no committed offset in group %r but a repair saved one: starting "
            "there, not from auto.offset.reset: %s",
            worker_name,
            len(found),
            config.application_id,
            dict(sorted(found.items())),
        )
    return {**committed, **found}
