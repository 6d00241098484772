"""Synchronous, timeout-bounded admin operations returning plain Python data.

confluent-kafka's ``AdminClient`` is future-based and returns librdkafka objects; the
rest of the library (internal-topic management, the reset tool, the CLI, tests) wants
"do it, wait at most N seconds, give me dicts". :class:`KafkaAdmin` is that facade, and
it is written for Apache Kafka's contract while tolerating the embedded Tansu broker:

* **No accidental topic creation.** A metadata request that *names* a topic creates it
  on Tansu (and on Kafka with ``auto.create.topics.enable=true``), so lookups always
  fetch metadata for all topics and filter locally, and the client is created with
  ``allow.auto.create.topics=false``.
* **Create/delete wait for metadata.** CreateTopics/DeleteTopics acknowledge before
  every broker's metadata reflects the change; callers that produce right after a
  create would otherwise race, so both wait until metadata agrees.
* **Config descriptions differ.** Kafka describes every config (defaults included);
  Tansu returns only the ones set explicitly. A key absent from
  :meth:`KafkaAdmin.describe_topic_configs` means "broker default".
* **Group states differ.** Describing an unknown group yields ``DEAD`` on Kafka and
  ``EMPTY`` on Tansu; Tansu never reports members. Treat both as "no active member".
* **DeleteRecords** makes Tansu drop the connection; :meth:`KafkaAdmin.supports` probes
  for it (and for other features Tansu lacks) in :mod:`.capabilities`.
* **Nothing listening fails fast.** The first call of an admin checks that a bootstrap
  address accepts a TCP connection (:mod:`.reachability`): an unreachable cluster is one
  :class:`~platform_streams.errors.BrokerUnreachableError` naming the address after a few
  seconds, not librdkafka's address-less transport failure after the request timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, TypeVar

from confluent_kafka import (
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from platform_streams.errors import BrokerError, IllegalStateError, StreamsTimeoutError
from platform_streams.kafka.admin_groups import GroupAdminMixin, wait_result
from platform_streams.kafka.clients import create_admin, credential_error
from platform_streams.kafka.errors import as_kafka_error, to_broker_error
from platform_streams.kafka.reachability import UNREACHABLE_AFTER_S, check_reachable

__all__ = ["KafkaAdmin", "TopicSpec"]

_log = logging.getLogger(__name__)

_K = TypeVar("_K")

_POLL_INTERVAL_S = 0.05


@dataclass(frozen=True)
class TopicSpec:
    """What a topic should look like: name, partition count, replication, topic configs.

    ``replication_factor=-1`` asks the broker for its default (KIP-464), which is what a
    library that does not know the cluster size should do.
    """

    name: str
    num_partitions: int
    replication_factor: int = -1
    config: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("topic name must not be empty")
        if self.num_partitions < 1:
            raise ValueError(f"topic {self.name!r}: num_partitions must be >= 1, got {self.num_partitions}")
        if self.replication_factor != -1 and self.replication_factor < 1:
            raise ValueError(
                f"topic {self.name!r}: replication_factor must be -1 (broker default) or >= 1, "
                f"got {self.replication_factor}"
            )


class KafkaAdmin(GroupAdminMixin):
    """Blocking admin facade; every call is bounded by a timeout in seconds.

    ``conf`` is a librdkafka admin configuration, or just a bootstrap string. Broker
    failures raise :class:`platform_streams.errors.BrokerError` (``code`` = Kafka error
    name); deadlines raise :class:`platform_streams.errors.StreamsTimeoutError`.
    """

    def __init__(self, conf: Mapping[str, Any] | str, *, request_timeout: float = 10.0) -> None:
        self._conf: dict[str, Any] = {"bootstrap.servers": conf} if isinstance(conf, str) else dict(conf)
        self._request_timeout = request_timeout
        self._client: AdminClient | None = create_admin(self._conf)
        self._reached = False

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Release the client; AdminClient has no close(), dropping it frees librdkafka."""
        self._client = None

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _admin(self) -> AdminClient:
        if self._client is None:
            raise IllegalStateError("KafkaAdmin is closed")
        if not self._reached:
            servers = self._conf.get("bootstrap.servers")
            if isinstance(servers, str):
                check_reachable(servers, min(UNREACHABLE_AFTER_S, self._request_timeout))
            self._reached = True
        # librdkafka's log lines wait in the client's queue until something polls it
        # (clients.py routes them to Python logging); nothing else polls an admin client.
        self._client.poll(0)
        return self._client

    # ------------------------------------------------------------------ topics

    def _metadata(self, timeout: float) -> ClusterMetadata:
        """All-topics metadata: naming a topic in the request could auto-create it."""
        try:
            return self._admin().list_topics(timeout=timeout)
        except KafkaException as exc:
            if self._client is not None:
                self._client.poll(0)  # serve the error callbacks the failure queued
            refused = credential_error(self._conf)
            if refused is not None:
                raise BrokerError(f"the broker refused our credentials: {refused}") from exc
            raise to_broker_error(exc, "fetch cluster metadata") from exc

    def list_topics(self, timeout: float = 10.0) -> dict[str, int]:
        """Return ``{topic: partition count}`` for user topics (``__``-prefixed are skipped)."""
        return {
            name: count for name, count in self._partition_map(timeout).items() if not name.startswith("__")
        }

    def _partition_map(self, timeout: float) -> dict[str, int]:
        topics: dict[str, int] = {}
        for name, meta in self._metadata(timeout).topics.items():
            err = meta.error
            if err is not None and not meta.partitions:
                continue  # e.g. UNKNOWN_TOPIC_OR_PART for a topic being deleted
            topics[name] = len(meta.partitions)
        return topics

    def partition_counts(self, topics: Iterable[str], timeout: float = 10.0) -> dict[str, int | None]:
        """Return the partition count of each topic, ``None`` for a missing one.

        Never creates a topic (see the module docstring): it lists all topics and filters.
        """
        known = self._partition_map(timeout)
        return {name: known.get(name) for name in topics}

    @staticmethod
    def _ready(meta: ClusterMetadata, name: str, partitions: int | None) -> bool:
        """True once ``name`` is in metadata; for a new topic (``partitions`` given) also
        with that many partitions, each with a leader, so producing to it works at once.
        An existing topic is only required to be visible: it may legitimately have an
        offline partition, which is not ours to wait out."""
        topic = meta.topics.get(name)
        if topic is None or not topic.partitions:
            return False
        if partitions is None:
            return True
        if topic.error is not None or len(topic.partitions) != partitions:
            return False
        return all(p.error is None and p.leader >= 0 for p in topic.partitions.values())

    def _wait_metadata(self, done: Callable[[ClusterMetadata], bool], deadline: float, what: str) -> None:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StreamsTimeoutError(f"timed out waiting until {what}")
            if done(self._metadata(max(0.5, min(remaining, self._request_timeout)))):
                return
            time.sleep(_POLL_INTERVAL_S)

    def create_topics(self, specs: Iterable[TopicSpec], timeout: float = 30.0) -> dict[str, str]:
        """Create topics idempotently; return ``{name: "created" | "exists"}``.

        Returns once every topic is visible in metadata (new ones with the requested
        partition count and a leader for every partition). An existing topic is not
        compared with its spec: use :meth:`partition_counts` and
        :meth:`describe_topic_configs` to validate it.
        """
        spec_list = list(specs)
        names = [s.name for s in spec_list]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate topic names in create_topics: {sorted(names)}")
        if not spec_list:
            return {}
        deadline = time.monotonic() + timeout
        new_topics = [
            NewTopic(s.name, s.num_partitions, s.replication_factor, config=dict(s.config)) for s in spec_list
        ]
        try:
            futures = self._admin().create_topics(
                new_topics, operation_timeout=timeout, request_timeout=timeout
            )
        except KafkaException as exc:
            raise to_broker_error(exc, f"create topics {names}") from exc
        outcome = self._topic_outcomes(
            futures, deadline, "create", "created", KafkaError.TOPIC_ALREADY_EXISTS, "exists"
        )
        wanted = {s.name: (s.num_partitions if outcome[s.name] == "created" else None) for s in spec_list}
        self._wait_metadata(
            lambda meta: all(self._ready(meta, n, p) for n, p in wanted.items()),
            deadline,
            f"topics {sorted(wanted)} are visible in metadata",
        )
        _log.debug("create_topics: %s", outcome)
        return outcome

    def delete_topics(self, names: Iterable[str], timeout: float = 30.0) -> dict[str, str]:
        """Delete topics; return ``{name: "deleted" | "missing"}`` once metadata agrees."""
        name_list = list(dict.fromkeys(names))
        if not name_list:
            return {}
        deadline = time.monotonic() + timeout
        try:
            futures = self._admin().delete_topics(
                name_list, operation_timeout=timeout, request_timeout=timeout
            )
        except KafkaException as exc:
            raise to_broker_error(exc, f"delete topics {name_list}") from exc
        outcome = self._topic_outcomes(
            futures, deadline, "delete", "deleted", KafkaError.UNKNOWN_TOPIC_OR_PART, "missing"
        )
        self._wait_metadata(
            lambda meta: not any(n in meta.topics and meta.topics[n].partitions for n in name_list),
            deadline,
            f"topics {name_list} are gone from metadata",
        )
        return outcome

    def describe_topic_configs(
        self, names: Iterable[str], timeout: float = 10.0
    ) -> dict[str, dict[str, str]]:
        """Return ``{topic: {config: value}}``; missing topics are left out of the result.

        Kafka lists every config including defaults, Tansu only explicitly set ones:
        an absent key means "broker default". Sensitive/unset (``None``) values are omitted.
        """
        deadline = time.monotonic() + timeout
        existing = self._partition_map(timeout)
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in dict.fromkeys(names) if n in existing]
        if not resources:
            return {}
        try:
            futures = self._admin().describe_configs(resources, request_timeout=timeout)
        except KafkaException as exc:
            raise to_broker_error(exc, "describe topic configs") from exc
        result: dict[str, dict[str, str]] = {}
        for resource, entries in self._existing_topics_results(
            futures, deadline, lambda resource: f"describe configs of {resource.name!r}"
        ):
            result[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
        return result

    def partition_racks(
        self, names: Iterable[str], timeout: float = 10.0
    ) -> dict[tuple[str, int], list[str | None]]:
        """DescribeTopics: per partition, the rack of each replica's broker (None: the broker
        has no ``broker.rack``); missing topics are left out of the result."""
        deadline = time.monotonic() + timeout
        topics = list(dict.fromkeys(names))
        if not topics:
            return {}
        try:
            futures = self._admin().describe_topics(TopicCollection(topics), request_timeout=timeout)
        except KafkaException as exc:
            raise to_broker_error(exc, "describe topics") from exc
        result: dict[tuple[str, int], list[str | None]] = {}
        for name, described in self._existing_topics_results(
            futures, deadline, lambda name: f"describe topic {name!r}"
        ):
            for info in described.partitions:
                result[(name, info.id)] = [node.rack or None for node in info.replicas]
        return result

    def _existing_topics_results(
        self, futures: Mapping[_K, Future[Any]], deadline: float, what: Callable[[_K], str]
    ) -> Iterator[tuple[_K, Any]]:
        """Each per-topic future's result; a topic deleted since it was listed is left out."""
        for key, future in futures.items():
            try:
                got = self._result(future.result, deadline, what(key))
            except KafkaException as exc:
                err = as_kafka_error(exc)
                if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise to_broker_error(exc, what(key)) from exc
            yield key, got

    def set_topic_configs(self, name: str, configs: Mapping[str, str], timeout: float = 10.0) -> None:
        """IncrementalAlterConfigs: set ``configs`` on topic ``name`` (others stay as they are)."""
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        deadline = time.monotonic() + timeout
        try:
            for future in self._admin().incremental_alter_configs([resource]).values():
                self._result(future.result, deadline, f"alter configs of {name!r}")
        except KafkaException as exc:
            raise to_broker_error(exc, f"alter configs of {name!r}") from exc

    # ------------------------------------------------------------------ log offsets

    def list_offsets(
        self,
        partitions: Iterable[tuple[str, int]],
        spec: Literal["earliest", "latest"] | int,
        timeout: float = 10.0,
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """ListOffsets: ``{(topic, partition): (offset, timestamp)}`` for ``spec``.

        ``spec`` is ``"earliest"``, ``"latest"`` or a timestamp in ms (the first offset
        whose record timestamp is >= it; offset ``-1`` when there is none). This is the raw
        broker answer, and on Tansu two of the three are wrong: "latest" is the start of the
        last batch + 1 and timestamps are matched against the broker's write time. Use
        :mod:`platform_streams.kafka.positions` for values that are right on both brokers.
        """
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        if spec == "earliest":
            offset_spec = OffsetSpec.earliest()
        elif spec == "latest":
            offset_spec = OffsetSpec.latest()
        else:
            offset_spec = OffsetSpec.for_timestamp(int(spec))
        deadline = time.monotonic() + timeout
        try:
            futures = self._admin().list_offsets(
                {TopicPartition(t, p): offset_spec for t, p in wanted}, request_timeout=timeout
            )
        except KafkaException as exc:
            raise to_broker_error(exc, f"list offsets ({spec})") from exc
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for tp, future in futures.items():
            try:
                info = self._result(future.result, deadline, f"list offsets of {tp.topic}-{tp.partition}")
            except KafkaException as exc:
                raise to_broker_error(exc, f"list offsets ({spec}) of {tp.topic}-{tp.partition}") from exc
            out[(tp.topic, tp.partition)] = (info.offset, info.timestamp)
        return out

    # ------------------------------------------------------------------ capabilities

    def supports(self, feature: str) -> bool:
        """Whether the broker supports ``feature``, found by a probe (:mod:`.capabilities`).

        Known features: ``"delete_records"``, ``"txn_offset_commit_fencing"``,
        ``"exact_list_offsets"``, ``"aborts_fenced_transactions"``; probed once per process and
        broker, then cached.
        """
        from platform_streams.kafka.capabilities import broker_supports

        return broker_supports(self, feature)

    @property
    def conf(self) -> dict[str, Any]:
        """The client configuration this admin was created with (a copy)."""
        return dict(self._conf)

    def delete_records(self, before: Mapping[tuple[str, int], int], timeout: float = 10.0) -> None:
        """DeleteRecords: make ``offset`` the log start of each ``(topic, partition)``.

        Only for brokers that :meth:`supports` ``"delete_records"`` (Tansu drops the
        connection). Purges consumed repartition records, as Kafka Streams does.
        """
        if not before:
            return
        deadline = time.monotonic() + timeout
        try:
            futures = self._admin().delete_records(
                [TopicPartition(t, p, o) for (t, p), o in before.items()],
                request_timeout=timeout,
                operation_timeout=timeout,
            )
            for tp, future in futures.items():
                self._result(future.result, deadline, f"delete records of {tp.topic}-{tp.partition}")
        except KafkaException as exc:
            raise to_broker_error(exc, f"delete records {sorted(before)}") from exc

    def create_partitions(self, name: str, total: int, timeout: float = 30.0) -> None:
        """Grow ``name`` to ``total`` partitions (CreatePartitions; Tansu lacks it)."""
        deadline = time.monotonic() + timeout
        try:
            futures = self._admin().create_partitions(
                [NewPartitions(name, total)], operation_timeout=timeout, request_timeout=timeout
            )
            self._result(futures[name].result, deadline, f"create partitions of {name!r}")
        except KafkaException as exc:
            raise to_broker_error(exc, f"grow topic {name!r} to {total} partitions") from exc
        self._wait_metadata(
            lambda meta: self._ready(meta, name, total), deadline, f"{name} has {total} partitions"
        )

    # ------------------------------------------------------------------ helpers

    _result = staticmethod(wait_result)

    def _topic_outcomes(
        self,
        futures: Mapping[str, Future[Any]],
        deadline: float,
        verb: str,
        done: str,
        tolerated_code: int,
        tolerated: str,
    ) -> dict[str, str]:
        """Wait for the per-topic futures of a create/delete: ``{name: done}`` on success,
        ``{name: tolerated}`` when it failed with ``tolerated_code`` (the idempotent case:
        already there, already gone); any other failure raises."""
        outcome: dict[str, str] = {}
        for name, future in futures.items():
            try:
                self._result(future.result, deadline, f"{verb} topic {name!r}")
                outcome[name] = done
            except KafkaException as exc:
                err = as_kafka_error(exc)
                if err is None or err.code() != tolerated_code:
                    raise to_broker_error(exc, f"{verb} topic {name!r}") from exc
                outcome[name] = tolerated
        return outcome
