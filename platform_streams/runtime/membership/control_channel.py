"""The application's control topic: who is running what, and requests to stop everyone.

Why a topic: librdkafka has no pluggable assignor and the admin API cannot be trusted to
list a group's members (some brokers show none), yet standby placement needs to know the other
clients and what they run, and SHUTDOWN_APPLICATION needs to reach every client. So each
client (one :class:`KafkaStreams`, i.e. one process) tails ``<application_id>-control``
(one partition, compacted) and writes two kinds of records to it:

* ``member/<process id>`` -> ``{"process", "active", "standby", "host",
  "truncate_changelogs"}`` every
  ``interval`` and whenever its tasks change; a tombstone on a clean close. A client whose
  last heartbeat is older than ``expiry`` (at least the session timeout) is gone.
* ``shutdown`` -> ``{"by", "reason"}``: every client that reads it after it started
  shuts down (KafkaStreams' SHUTDOWN_APPLICATION). Requests older than the client are
  history and ignored, so an application restarted after such a shutdown runs again.

* ``report/<member id>`` and ``assignment``: the state-aware assignment protocol
  (:mod:`platform_streams.runtime.task_assignment.protocol`), handed to its coordinator.
* ``range/<task id>``: the changelog ranges a task wrote for committed input, which a
  restore applies without reading each record's header
  (:mod:`platform_streams.runtime.restore.restore_ranges`).
* ``topology``: the manifest of the topology this client runs, written at its start
  (:mod:`platform_streams.topology.manifest`); the deploy gate reads the last one
  (:mod:`platform_streams.ops.deployed_topology`). No client reads it.

The worker also uses this topic for its exactly-once fencing check (an offset commit of
partition 0 in the application's group; see ``StreamWorker``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaError,
    KafkaException,
    TopicPartition,
    create_consumer,
    create_producer,
    is_denied,
)
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.placement import MemberInfo
from platform_streams.runtime.restore.restore_ranges import RANGE_KEY_PREFIX

__all__ = ["ControlChannel", "control_topic_name"]

log = logging.getLogger(__name__)

_MEMBER = "member/"
_SHUTDOWN = "shutdown"
_ASSIGNMENT_KEYS = ("report/", "assignment")

LocalTasks = Callable[[], tuple[set[TaskId], set[TaskId]]]


def control_topic_name(application_id: str) -> str:
    return f"{application_id}-control"


class ControlChannel:
    """Tails and writes the control topic on a background thread."""

    def __init__(
        self,
        config: StreamsConfig,
        process_id: str,
        *,
        local_tasks: LocalTasks,
        on_shutdown_request: Callable[[str], None],
        on_members_changed: Callable[[], None] | None = None,
        on_assignment_record: Callable[[str, dict[str, Any] | None], None] | None = None,
        on_range_record: Callable[[str, dict[str, Any] | None], None] | None = None,
    ) -> None:
        self.config = config
        self.process_id = process_id
        self.topic = control_topic_name(config.application_id)
        self._local_tasks = local_tasks
        self._on_shutdown_request = on_shutdown_request
        self._on_members_changed = on_members_changed
        #: state-aware assignment (runtime/task_assignment): its reports and assignments
        self._on_assignment_record = on_assignment_record
        #: changelog ranges written for committed input (runtime/restore/restore_ranges.py)
        self._on_range_record = on_range_record
        self.interval_s = max(0.5, 2 * config.heartbeat_interval_ms / 1000.0)
        self.expiry_ms = max(config.session_timeout_ms, int(3 * self.interval_s * 1000))
        self._lock = threading.Lock()
        #: why the broker refused this channel (an ACL), None while it has not
        self.denied: StreamsError | None = None
        self._members: dict[str, MemberInfo] = {}
        self._stop = threading.Event()
        self._publish_now = threading.Event()
        self._started_ms = int(time.time() * 1000)
        self._caught_up = False
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._consumer: Any = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        base = self.config.restore_consumer_configs()
        client = self.config.effective_client_id
        self._consumer = create_consumer(
            {
                **base,
                "group.id": f"{self.config.application_id}-control-reader",  # named in _deny
                "client.id": f"{client}-control",
            }
        )
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._producer = create_producer(
            {**self.config.producer_configs(), "client.id": f"{client}-control-producer", "linger.ms": 0}
        )
        self._thread = threading.Thread(target=self._run, name=f"{client}-control", daemon=True)
        self._thread.start()

    def close(self, *, leave: bool = True) -> None:
        """Stop tailing; ``leave`` publishes a tombstone so the others forget this client now.

        The clients are dropped once the thread is gone (not while it may still use them):
        a librdkafka client left referenced keeps reconnecting until garbage collection.
        """
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        stopped = self._thread is None or not self._thread.is_alive()
        if self._producer is not None:
            if leave:
                self._send(_MEMBER + self.process_id, None)
            self._producer.flush(5)
            if stopped:
                self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- what others see ------------------------------------------------------------------

    def publish_soon(self) -> None:
        """Publish this client's tasks at the next loop (after an assignment changed)."""
        self._publish_now.set()

    def publish_record(self, key: str, value: dict[str, Any] | None) -> None:
        """Write one record of the assignment protocol now (flushed: the others wait for it)."""
        self._send(key, value)
        if self._producer is not None:
            self._producer.flush(5)

    @property
    def caught_up(self) -> bool:
        """True once the topic was read to its end (what was written before the start is known)."""
        return self._caught_up

    def send_record(self, key: str, value: dict[str, Any] | None) -> None:
        """Write one record without waiting for it (flushed at the latest by :meth:`close`)."""
        self._send(key, value)

    def request_shutdown(self, reason: str) -> None:
        """Ask every client of the application to shut down (SHUTDOWN_APPLICATION)."""
        self._send(_SHUTDOWN, {"by": self.process_id, "reason": reason})
        if self._producer is not None:
            self._producer.flush(5)

    def members(self) -> dict[str, MemberInfo]:
        """The clients alive now (this one included), by process id."""
        now = int(time.time() * 1000)
        active, standby = self._local_tasks()
        with self._lock:
            live = {pid: m for pid, m in self._members.items() if now - m.timestamp_ms <= self.expiry_ms}
        live[self.process_id] = MemberInfo(
            self.process_id, frozenset(active), frozenset(standby), self.config.application_server, now
        )
        return live

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        next_publish = 0.0
        while not self._stop.is_set():
            try:
                self._read()
                now = time.monotonic()
                if now >= next_publish or self._publish_now.is_set():
                    self._publish_now.clear()
                    self._publish()
                    next_publish = now + self.interval_s
                self._producer.poll(0)
            except Exception:  # the channel must outlive broker trouble
                log.exception("control channel of %s: iteration failed; retrying", self.config.application_id)
                self._stop.wait(1.0)

    def _read(self) -> None:
        changed = False
        for msg in self._consumer.consume(500, 0.1):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._caught_up = True
                elif is_denied(err):
                    self._deny(f"{err.str()} ({err.name()})")
                elif err.fatal():
                    raise KafkaException(err)
                continue
            changed |= self._apply(msg)
        if changed and self._on_members_changed is not None:
            self._on_members_changed()

    def _apply(self, msg: Any) -> bool:
        key = (msg.key() or b"").decode("utf-8", "replace")
        value = msg.value()
        written_ms = msg.timestamp()[1]
        if key == _SHUTDOWN:
            if value is not None and (self._caught_up or written_ms >= self._started_ms):
                data = _json(value)
                by = data.get("by", "?")
                log.error("SHUTDOWN_APPLICATION requested by %s: %s", by, data.get("reason", ""))
                self._on_shutdown_request(str(by))
            return False
        if self._on_assignment_record is not None and key.startswith(_ASSIGNMENT_KEYS):
            self._on_assignment_record(key, None if value is None else _json(value))
            return False
        if key.startswith(RANGE_KEY_PREFIX):
            if self._on_range_record is not None:
                self._on_range_record(key, None if value is None else _json(value))
            return False
        if not key.startswith(_MEMBER):
            return False
        pid = key[len(_MEMBER) :]
        if pid == self.process_id:
            return False
        with self._lock:
            if value is None:
                return self._members.pop(pid, None) is not None
            data = _json(value)
            seen_ms = int(time.time() * 1000) if self._caught_up else written_ms
            before = self._members.get(pid)
            info = MemberInfo(
                pid,
                frozenset(TaskId.parse(t) for t in data.get("active", [])),
                frozenset(TaskId.parse(t) for t in data.get("standby", [])),
                data.get("host"),
                seen_ms,
            )
            self._members[pid] = info
            return before is None or (before.active, before.standby) != (info.active, info.standby)

    def _publish(self) -> None:
        active, standby = self._local_tasks()
        self._send(
            _MEMBER + self.process_id,
            {
                "process": self.process_id,
                "active": sorted(str(t) for t in active),
                "standby": sorted(str(t) for t in standby),
                "host": self.config.application_server,
                # ``snapshot truncate`` runs only while every live client says it restores
                # and keeps its standbys from snapshots (ops/changelog_truncation.py)
                "truncate_changelogs": self.config.state_snapshot_truncate_changelogs,
            },
        )

    def _send(self, key: str, value: dict[str, Any] | None) -> None:
        payload = None if value is None else json.dumps(value, sort_keys=True).encode()
        try:
            self._producer.produce(self.topic, payload, key.encode(), partition=0)
        except (BufferError, KafkaException) as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if isinstance(err, KafkaError) and is_denied(err):
                self._deny(f"{err.str()} ({err.name()})")
                return
            log.warning("control channel: could not publish %s: %s", key, exc)

    def _deny(self, reason: str) -> None:
        """An ACL refusal is not retried (the workers would wait for the channel forever):
        the client stops, naming the topic and the refusal."""
        if self.denied is not None:
            return
        group = f"{self.config.application_id}-control-reader"
        self.denied = StreamsError(
            f"the broker denied the control channel (topic {self.topic!r}, group {group!r}): {reason}"
        )
        log.error("%s", self.denied)
        self._stop.set()
        self._on_shutdown_request(str(self.denied))


def _json(value: bytes) -> dict[str, Any]:
    try:
        data = json.loads(value)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
