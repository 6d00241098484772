"""What the runtime does differently on a broker that has Kafka's features (probed, not named).

The places where a broker without a Kafka feature needs a workaround; the features are
probed at start (:mod:`platform_streams.kafka.capabilities`), never inferred from a name:

* **Fencing a zombie under exactly_once_v2.** Kafka rejects a transactional offset commit
  from a member of a stale generation (KIP-447), so the broker alone fences a worker whose
  tasks moved. A broker that accepts it gets every EOS commit is preceded by a plain offset
  commit to the control topic, which the group coordinator checks against the membership
  (``StreamWorker._check_membership``). :func:`membership_check_topic` switches those
  extra commits off where the broker fences by itself.
* **Sending under exactly_once_v2.** Where the broker aborts the open transaction of a
  producer whose transactional.id is taken over (Kafka), records are sent as they come in an
  always open transaction, as Kafka Streams does; elsewhere they wait in memory for the
  commit, so that nothing a crash leaves open can become visible
  (``StreamsProducer``, :func:`sends_eagerly`).
* **Offsets without records under exactly_once_v2.** Where a transaction that holds only
  input offsets may lose them (``offsets_only_transactions``: the embedded broker keeps them
  for a producer's first such transaction only), a worker commits offsets that no record goes
  with -- input that produced nothing, the offsets a group repair saved -- as a plain offset
  commit, which the group coordinator checks against the membership
  (:func:`commits_offsets_in_empty_transactions`). Nothing else is in such a transaction, so
  nothing loses its atomicity.
* **Leaving a group mid-rebalance.** Kafka's group coordinator elects a new leader when the
  leader leaves while the group rebalances; the embedded broker's keeps the departed leader,
  and the group never completes another rebalance (docs/brokers.md). Where the coordinator
  does not elect one (:func:`elects_new_group_leader`), a stopping worker first lets the
  rebalance finish (:class:`~platform_streams.runtime.membership.leave_guard.LeaveGuard`).
* **Records a fetch skipped.** Where the broker can advance a partition's high watermark
  before storing the batch (the embedded broker's storage), an at-least-once worker checks its
  repartition topics' offsets as it routes records (:mod:`~platform_streams.runtime.workers.offset_gaps`);
  where it moves only after the append (``high_watermark_after_append``: Apache Kafka), no
  check (:func:`broker_may_skip_batches`).
* **Repairing a wedged group.** The group repair (:mod:`~platform_streams.runtime.membership.rebalance_wait`)
  and the reading of the offsets a repair saved engage only where the coordinator is not
  known to elect a new leader itself (:func:`group_repair_needed`).
* **Purging repartition topics.** Kafka Streams deletes consumed repartition records after
  a commit (``TaskManager.maybePurgeCommittedRecords``, every
  ``repartition.purge.interval.ms``): :class:`RepartitionPurger`. On a broker without
  DeleteRecords it is skipped with one warning.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError, StreamsError
from platform_streams.kafka import KafkaAdmin
from platform_streams.topology.compiler import TopologyPlan

__all__ = [
    "RepartitionPurger",
    "broker_may_skip_batches",
    "commits_offsets_in_empty_transactions",
    "elects_new_group_leader",
    "group_repair_needed",
    "known_elects_new_group_leader",
    "membership_check_topic",
    "probe_group_leader_election",
    "sends_eagerly",
]

log = logging.getLogger(__name__)

TP = tuple[str, int]


def membership_check_topic(config: StreamsConfig, control_topic: str | None) -> str | None:
    """The topic EOS workers commit to before each transaction to prove membership, or None.

    None (no extra commits) when the guarantee is at-least-once or the broker fences stale
    transactional offset commits itself.
    """
    if not config.exactly_once or control_topic is None:
        return None
    with KafkaAdmin(config.admin_configs()) as admin:
        fences = admin.supports("txn_offset_commit_fencing")
    if fences:
        log.info(
            "the broker fences stale transactional offset commits (KIP-447): no membership-check commits"
        )
        return None
    log.info("the broker accepts stale transactional offset commits: EOS commits check membership first")
    return control_topic


def sends_eagerly(config: StreamsConfig) -> bool:
    """Whether exactly-once workers may send records before their commit (see the module docstring)."""
    if not config.exactly_once:
        return False
    with KafkaAdmin(config.admin_configs()) as admin:
        aborts = admin.supports("aborts_fenced_transactions")
    if aborts:
        log.info("the broker aborts a fenced producer's open transaction: EOS records are sent as they come")
    else:
        log.warning(
            "the broker does not abort a fenced producer's open transaction (it commits it): EOS "
            "records wait in memory until their commit (slower commits, see the README)"
        )
    return aborts


def commits_offsets_in_empty_transactions(config: StreamsConfig) -> bool:
    """Whether a transaction with offsets and no records stores its offsets every time
    (``offsets_only_transactions``, probed once per process); exactly-once only."""
    if not config.exactly_once:
        return True
    with KafkaAdmin(config.admin_configs()) as admin:
        stores = admin.supports("offsets_only_transactions")
    if not stores:
        log.info(
            "the broker drops the offsets of a transaction without records: EOS commits offsets that "
            "no record goes with as plain offset commits"
        )
    return stores


def broker_may_skip_batches(config: StreamsConfig) -> bool:
    """Whether a fetch may skip a batch the broker has not finished storing (not
    ``high_watermark_after_append``, probed once per process): the offset-gap guard's switch."""
    with KafkaAdmin(config.admin_configs()) as admin:
        after_append = admin.supports("high_watermark_after_append")
    if after_append:
        log.info("the broker moves the high watermark after the append: no offset-gap guard")
    return not after_append


def group_repair_needed(config: StreamsConfig) -> bool:
    """Whether the group repair may act, and a repair's saved offsets be read: not where
    the group coordinator is known to elect a new leader itself (Apache Kafka), which
    never wedges a group and so never has a repair's backup group."""
    return _elects_leader.get(str(config.admin_configs().get("bootstrap.servers", ""))) is not True


#: per bootstrap.servers: whether the group coordinator elects a new leader (probed once)
_elects_leader: dict[str, bool] = {}
#: bootstrap.servers whose probe is running
_probing: set[str] = set()
_probing_lock = threading.Lock()


def known_elects_new_group_leader(config: StreamsConfig) -> bool | None:
    """The probe's answer for ``config``'s broker, None while nobody has one (never asks)."""
    return _elects_leader.get(str(config.admin_configs().get("bootstrap.servers", "")))


def probe_group_leader_election(config: StreamsConfig) -> threading.Thread | None:
    """Ask :func:`elects_new_group_leader` on a thread of its own, unless answered or under way.

    Called by a member of the group once it has an assignment (the group then lists it
    where the coordinator lists members at all): the answer is read when a worker stops,
    which must not wait for a broker (an unreachable one would add the probe's timeout to
    every close). A failed probe leaves no answer, and the next assignment asks again.
    """
    servers = str(config.admin_configs().get("bootstrap.servers", ""))
    with _probing_lock:
        if servers in _elects_leader or servers in _probing:
            return None
        _probing.add(servers)

    def probe() -> None:
        try:
            elects_new_group_leader(config)
        except Exception as exc:  # a probe is no reason to disturb anything
            log.debug("probing the group coordinator's leader election failed: %s", exc)
        finally:
            with _probing_lock:
                _probing.discard(servers)

    thread = threading.Thread(target=probe, name=f"{config.application_id}-group-leader-probe", daemon=True)
    thread.start()
    return thread


def elects_new_group_leader(config: StreamsConfig) -> bool:
    """Whether the group coordinator elects a new leader when the leader leaves mid-rebalance.

    Probed by describing the application's group from one of its members, once per process
    and broker (a group described as EMPTY or DEAD is no answer: this member is not in it).
    Kafka's coordinator, which tracks every member and elects a leader among those that
    rejoin, lists the members; the embedded broker's lists none, and keeps a departed
    leader (docs/brokers.md). A group listed without members while this member is in it
    therefore gets the careful leave; a failed look counts as Kafka's behaviour (no wait:
    the group repair remains for such a broker).
    """
    servers = str(config.admin_configs().get("bootstrap.servers", ""))
    known = _elects_leader.get(servers)
    if known is not None:
        return known
    try:
        with KafkaAdmin(config.admin_configs()) as admin:
            description = admin.describe_group(config.application_id, timeout=10.0)
    except StreamsError as exc:
        log.debug("describing group %r to see whether it lists members: %s", config.application_id, exc)
        return True
    members = description.members
    if not members and description.state in ("EMPTY", "DEAD"):
        return True  # not a member (yet): no answer
    _elects_leader[servers] = bool(members)
    log.info(
        "the group coordinator %s its members: a member leaving mid-rebalance %s",
        "lists" if members else "does not list",
        "does not wait" if members else "first lets it finish (the coordinator keeps a departed leader)",
    )
    return bool(members)


class RepartitionPurger:
    """Deletes repartition records below the committed offsets, at most every interval.

    Owned by one worker (one thread); the admin client is created on first use and the
    broker probed once per process. Failures are logged, never raised: purging only saves
    disk, correctness never depends on it.
    """

    def __init__(self, plan: TopologyPlan, config: StreamsConfig) -> None:
        app = config.application_id
        self._topics = plan.repartition_topics(app)
        self._config = config
        self._interval_s = config.repartition_purge_interval_ms / 1000.0
        self._next = time.monotonic() + self._interval_s
        self._admin: KafkaAdmin | None = None
        self._enabled = bool(self._topics)
        #: partitions purged so far, and the offset each was purged to (metrics, tests)
        self.purged: dict[TP, int] = {}

    @property
    def enabled(self) -> bool:
        """False when there is nothing to purge or the broker cannot delete records."""
        return self._enabled

    def after_commit(self, committed: Mapping[TP, int]) -> None:
        """Called with the offsets just committed; purges when the interval has passed."""
        if not self._enabled or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._interval_s
        wanted = {tp: o for tp, o in committed.items() if tp[0] in self._topics and self.purged.get(tp) != o}
        if not wanted:
            return
        if self._admin is None:
            self._admin = KafkaAdmin(self._config.admin_configs())
            if not self._admin.supports("delete_records"):
                log.warning("the broker does not support DeleteRecords: repartition topics are not purged")
                self.close()
                self._enabled = False
                return
        try:
            self._admin.delete_records(wanted)
        except BrokerError as exc:
            log.warning("purging repartition records failed (retried after the next commit): %s", exc)
            return
        self.purged.update(wanted)
        log.debug("purged repartition records below %s", wanted)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
