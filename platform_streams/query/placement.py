"""Key placement: may a key query go to the owner of ``murmur2(key) % partitions``?

Kafka Streams routes a key query to the task of the key's partition, computed with Java's
murmur2 partitioner. That is right only if every record of the store's input sits in that
partition. Records written by Streams itself (repartition topics) always do; records of a
*source topic* do only if their producers used murmur2 -- Java clients, or librdkafka with
``partitioner=murmur2_random``. confluent-kafka's default, ``consistent_random``, places by
CRC32: a table fed by such a topic holds most keys in "the wrong" partition, and a routed
query would answer "key not found" for a key that exists.

So every client checks, as records are consumed, that each record of a source topic that
feeds a store lies in the partition murmur2 gives its key (:class:`PlacementCheck` in the
fused source code: a set lookup per record, the hash once per distinct key). A topic with
one misplaced record is *not murmur2-placed*, for good:

* the mismatches are counted (``kafka_streams_source_topic_murmur2_mismatches_total``) and a
  warning names the topic and the producer setting, once per topic and client;
* key queries of every store it feeds stop routing: ``query_metadata_for_key`` answers "not
  available" with the reason, and the HTTP API asks every partition's owner (scatter-gather,
  one hop each, merged: ``kafka_streams_store_key_query_scatter_total``);
* the verdict survives restarts and reaches every instance: it is kept in
  ``<state_dir>/<application_id>/key-placement.json`` and published to the compacted
  ``<application_id>-metadata`` topic (key ``key-placement:<topic>``), which every instance
  reads from the beginning; a Spark backfill that saw such records publishes it too.
  Only an application reset (which deletes the metadata topic and local state) forgets it.

Which topics a store depends on: the external source topics among the ancestors, within
its sub-topology, of the processors that use the store. A store keyed differently from its
source sits behind a repartition topic (written with murmur2 by us), so it keeps routing.
A Processor API store written under keys other than the record keys cannot be checked
this way (Kafka Streams has the same limitation).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from platform_streams.processor.partitioner import PlacementCheck
from platform_streams.state.private_files import app_state_dir
from platform_streams.topology.compiler import TopologyPlan
from platform_streams.topology.nodes import ProcessorNode, SourceNode

__all__ = ["PLACEMENT_FILE", "PRODUCER_SETTING", "KeyPlacement", "store_source_topics"]

log = logging.getLogger(__name__)

PLACEMENT_FILE = "key-placement.json"
#: what producers of a source topic must set for single-hop key queries
PRODUCER_SETTING = "partitioner=murmur2_random"
_VERSION = 1


def store_source_topics(plan: TopologyPlan, application_id: str) -> dict[str, frozenset[str]]:
    """Store -> the physical external source topics its key placement depends on."""
    result: dict[str, frozenset[str]] = {}
    for sub in plan.subtopologies:
        nodes = {node.name: node for node in sub.nodes}
        for store in sub.stores:
            users = [n for n in sub.nodes if isinstance(n, ProcessorNode) and store in n.stores]
            topics: set[str] = set()
            seen: set[str] = set()
            stack = [n.name for n in users]
            while stack:
                name = stack.pop()
                if name in seen or name not in nodes:
                    continue
                seen.add(name)
                node = nodes[name]
                if isinstance(node, SourceNode):
                    topics.update(t for t in node.topics if not plan.is_internal(t))
                stack.extend(node.parents)
            result[store] = frozenset(plan.physical_topic(t, application_id) for t in topics)
    return result


class KeyPlacement:
    """One client's verdicts on its source topics' key placement (see the module doc)."""

    def __init__(
        self,
        plan: TopologyPlan,
        application_id: str,
        state_dir: Path,
        partition_counts: Callable[[], Mapping[str, int]],
    ) -> None:
        self.store_topics = store_source_topics(plan, application_id)
        self.checked_topics = frozenset(t for topics in self.store_topics.values() for t in topics)
        self.path = app_state_dir(Path(state_dir), application_id) / PLACEMENT_FILE
        self._partition_counts = partition_counts
        self._lock = threading.Lock()
        #: topic -> misplaced records seen by this client
        self.mismatches: dict[str, int] = {}
        #: topics known not to be murmur2-placed -> how it was learnt
        self.misplaced: dict[str, str] = {}
        #: tells the other instances (the metadata topic), set once the directory runs
        self.publisher: Callable[[str], None] | None = None
        self._load()

    # ------------------------------------------------------------------ verdicts

    def is_routable(self, store: str) -> bool:
        """True while every source topic the store depends on is murmur2-placed (or unseen)."""
        misplaced = self.misplaced
        return not any(topic in misplaced for topic in self.store_topics.get(store, ()))

    def misplaced_topics(self, store: str) -> list[str]:
        return sorted(t for t in self.store_topics.get(store, ()) if t in self.misplaced)

    def reason(self, store: str) -> str:
        """Why key queries of ``store`` cannot be routed ('' if they can)."""
        topics = self.misplaced_topics(store)
        if not topics:
            return ""
        return (
            f"the keys of store {store!r} are not placed by murmur2 in source topic(s) "
            f"{', '.join(topics)} (produce with {PRODUCER_SETTING}): any partition may hold a key, "
            "so only a query of every partition can answer"
        )

    # ------------------------------------------------------------------ checking

    def checks_for(self, topics: Iterable[str], partition: int) -> dict[str, PlacementCheck]:
        """A :class:`PlacementCheck` per topic of one task that feeds a store (``PlacementChecks``)."""
        counts = self._partition_counts()
        checks: dict[str, PlacementCheck] = {}
        for topic in topics:
            count = counts.get(topic, 0)
            if topic in self.checked_topics and count > 0:
                checks[topic] = PlacementCheck(topic, partition, count, self.on_mismatch)
        return checks

    def on_mismatch(self, topic: str, partition: int) -> None:
        """A record of ``topic`` at ``partition`` is not where murmur2 puts its key (worker thread)."""
        with self._lock:
            self.mismatches[topic] = self.mismatches.get(topic, 0) + 1
            first = topic not in self.misplaced
            if first:
                self.misplaced[topic] = "consumed"
        if first:
            stores = sorted(s for s, topics in self.store_topics.items() if topic in topics)
            log.warning(
                "source topic %s: a record in partition %d is not in the partition murmur2 gives its "
                "key -- its producers do not use Java's partitioner (confluent-kafka's default is "
                "consistent_random): set %s on them. Until the application is reset, key queries of "
                "%s ask every partition instead of the key's owner.",
                topic,
                partition,
                PRODUCER_SETTING,
                ", ".join(stores),
            )
            self._save()
            self._publish(topic)

    def learn(self, topic: str, source: str) -> None:
        """Another instance, a backfill or an earlier run found ``topic`` not murmur2-placed."""
        with self._lock:
            if topic in self.misplaced:
                return
            self.misplaced[topic] = source
        log.info("source topic %s is not murmur2-placed (learnt from %s)", topic, source)
        self._save()

    def publish_known(self) -> None:
        """Tell the other instances every verdict this one holds (at directory start)."""
        for topic in sorted(self.misplaced):
            self._publish(topic)

    def _publish(self, topic: str) -> None:
        publisher = self.publisher
        if publisher is not None:
            publisher(topic)

    # ------------------------------------------------------------------ persistence

    def _load(self) -> None:
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return
        topics = data.get("not_murmur2_placed", {}) if isinstance(data, dict) else {}
        for topic in topics if isinstance(topics, dict) else ():
            self.misplaced[str(topic)] = "persisted"
        for store in sorted(self.store_topics):
            if not self.is_routable(store):
                log.warning("key queries of store %s ask every partition: %s", store, self.reason(store))

    def _save(self) -> None:
        with self._lock:
            topics = {t: {"learnt_from": src} for t, src in sorted(self.misplaced.items())}
        document = {"v": _VERSION, "not_murmur2_placed": topics, "updated_ms": int(time.time() * 1000)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(document, indent=1), encoding="utf-8")
            tmp.replace(self.path)
        except OSError as exc:  # the metadata topic still carries the verdict
            log.warning("could not persist key placement to %s: %s", self.path, exc)
