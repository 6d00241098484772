"""Task and node contexts: what processors and stores see of the task running them.

One :class:`TaskContext` per task holds the mutable per-record state (current input
record, stream time) that the hot path updates with plain attribute writes. Each
processor gets a :class:`NodeContext`, which knows the node's children and its
connected stores, so ``forward`` and ``get_state_store`` need no lookups by node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from platform_streams.errors import InvalidStateStoreError, TopologyError
from platform_streams.processor.api import Cancellable, ProcessorContext, PunctuationType, Punctuator
from platform_streams.processor.node import Forward
from platform_streams.processor.punctuation import PunctuationQueue, PunctuationSchedule
from platform_streams.processor.record import Headers, Record, RecordMetadata
from platform_streams.processor.record_collector import RecordCollector
from platform_streams.processor.source_position import SourcePositionHeader
from platform_streams.processor.task_id import TaskId
from platform_streams.state.changelog_format import TIMESTAMPED_VALUE_MARK
from platform_streams.state.private_files import make_private_dirs
from platform_streams.state.store_context import ChangeSender, RestoreCallback, StateStoreContext

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig


class StoreRegistrar(Protocol):
    """Receives store registrations (the task's ProcessorStateManager implements this)."""

    def register_store(
        self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None, partition: int
    ) -> None: ...


class _NoRegistrar:
    """Keeps nothing: stores of a context without a state manager are never restored."""

    def register_store(
        self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None, partition: int
    ) -> None:
        return None


class TaskContext(StateStoreContext):
    """Per-task context shared by all nodes of a task; implements the store contract."""

    def __init__(
        self,
        *,
        config: StreamsConfig,
        task_id: TaskId,
        collector: RecordCollector,
        clock_ms: Callable[[], int],
        task_dir: Path,
        changelog_topics: Mapping[str, str],
        registrar: StoreRegistrar | None = None,
    ) -> None:
        self._config = config
        self._task_id = task_id
        self.collector = collector
        self.clock_ms = clock_ms
        self._task_dir = task_dir
        #: store name -> physical changelog topic
        self.changelog_topics = dict(changelog_topics)
        self.registrar: StoreRegistrar = registrar or _NoRegistrar()
        #: the raw input record being processed (a confluent Message or the driver's twin)
        self.current: Any = None
        #: the last input record processed (set once per batch): the context of updates a cache
        #: flush emits later, when no record is current (approximates Kafka's cached record context)
        self.last_record: Any = None
        self.stream_time = -1
        #: the timestamp of ``current`` as its source extracted it (valid while ``current`` is set):
        #: the time a key-value store's change is logged with, as Kafka's recordContext().timestamp()
        self.record_time = -1
        self.punctuations = PunctuationQueue()
        #: True once a stream-time punctuator is scheduled: the task then checks after each record
        self.has_stream_punctuation = False
        self.stores: dict[str, Any] = {}
        #: the worker's shared record cache (stores find it here), None = one per store
        self.record_cache: Any = None
        #: global stores (GlobalKTable) of this client, readable by every processor; set by the runtime
        self.global_stores: Mapping[str, Any] = {}
        self.commit_requested = False
        #: records dropped by the task (invalid timestamp) or its processors (null key or value
        #: in aggregations, joins and table sources; late windowed records), as Kafka Streams'
        #: processors call ``droppedRecordsSensor.record()``: the dropped-records metric adds it
        self.dropped_records = 0
        #: builds the ``__ps_src`` header of changelog writes; set by the runtime's task
        self.source_position: SourcePositionHeader | None = None
        #: the stores whose changelog records carry ``TIMESTAMPED_VALUE_MARK`` (timestamped
        #: key-value stores: state/changelog_format.py says why); their layers add themselves
        self.timestamped_changelogs: set[str] = set()

    # -- StateStoreContext -----------------------------------------------------------------
    @property
    def application_id(self) -> str:
        return self._config.application_id

    @property
    def task_id(self) -> TaskId:
        return self._task_id

    @property
    def config(self) -> StreamsConfig:
        return self._config

    @property
    def state_dir(self) -> Path:
        make_private_dirs(self._task_dir)
        return self._task_dir

    @property
    def changelog_partition(self) -> int:
        return self._task_id.partition

    def register(self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None) -> None:
        self.stores[store.name] = store
        self.registrar.register_store(store, restore_callback, changelog_topic, self.changelog_partition)

    def log_change(self, store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        topic = self.changelog_topics.get(store_name)
        if topic is None:
            raise TopologyError(f"store {store_name!r} logs changes but has no changelog topic")
        source = self.source_position
        headers = source.headers(self.current) if source is not None else None
        if store_name in self.timestamped_changelogs:
            headers = [*(headers or ()), TIMESTAMPED_VALUE_MARK]
        self.collector.send(topic, key, value, timestamp, headers, self._task_id.partition)

    def change_sender(self, store_name: str) -> ChangeSender:
        """:meth:`log_change`'s topic, headers and partition resolved once (per flush), with
        the collector's own send."""
        topic = self.changelog_topics.get(store_name)
        if topic is None:
            raise TopologyError(f"store {store_name!r} logs changes but has no changelog topic")
        source = self.source_position
        headers = source.headers(self.current) if source is not None else None
        if store_name in self.timestamped_changelogs:
            headers = [*(headers or ()), TIMESTAMPED_VALUE_MARK]
        partition = self._task_id.partition
        quiet_sender = getattr(self.collector, "quiet_sender", None)  # the Kafka collector's
        quiet = None if quiet_sender is None else quiet_sender(topic, partition)
        return ChangeSender(self.collector.send, topic, headers, partition, quiet)

    def record_metadata(self) -> RecordMetadata | None:
        msg = self.current
        if msg is None:
            return None
        return RecordMetadata(msg.topic(), msg.partition(), msg.offset())

    def record_topic(self) -> str | None:
        """The topic of the current record, else of the last one processed (cache flushes)."""
        msg = self.current if self.current is not None else self.last_record
        return None if msg is None else str(msg.topic())

    def current_stream_time_ms(self) -> int:
        return self.stream_time

    def current_system_time_ms(self) -> int:
        return self.clock_ms()

    # -- used by node contexts -------------------------------------------------------------
    def schedule(
        self, node_name: str, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> PunctuationSchedule:
        # As Kafka Streams' StreamTask.schedule: stream-time punctuation is aligned to 0, so it
        # fires as soon as the task has data and then on multiples of the interval; wall-clock
        # punctuation first fires one interval from now.
        if punctuation_type is PunctuationType.STREAM_TIME:
            first = 0
            self.has_stream_punctuation = True
        else:
            first = self.clock_ms() + interval_ms
        return self.punctuations.add(
            PunctuationSchedule(node_name, interval_ms, punctuation_type, callback, first)
        )


#: ``(value type, getter of its first part) -> (key, new, old, timestamp) function``
FusePair = Callable[[type[tuple[Any, Any]], Callable[[Any], Any]], Callable[[Any, Any, Any, int], None]]


class NodeContext(ProcessorContext):
    """The :class:`ProcessorContext` of one processor node in one task."""

    def __init__(
        self,
        task: TaskContext,
        node_name: str,
        children: Mapping[str, Forward],
        store_names: list[str],
        fuse_pair: FusePair | None = None,
    ) -> None:
        self.task = task
        self.node_name = node_name
        self.children = dict(children)
        self.store_names = set(store_names)
        self._fanout = _fanout(list(self.children.values()))
        self._fuse_pair = fuse_pair

    def forward_fn(self) -> Forward:
        """A direct call to all children, for field-based processors."""
        return self._fanout

    def pair_forward_fn(
        self, value_type: type[tuple[Any, Any]], first: Callable[[Any], Any]
    ) -> Callable[[Any, Any, Any, int], None] | None:
        """A ``(key, new, old, timestamp)`` call to all children with the value
        ``value_type((new, old))`` and no headers, compiled with the children's fused code
        (``fusion.compile_pair_entry``); None where the task does not fuse. For a table
        processor's flush listener: one call per flushed update instead of three."""
        return None if self._fuse_pair is None else self._fuse_pair(value_type, first)

    @property
    def application_id(self) -> str:
        return self.task.application_id

    @property
    def task_id(self) -> TaskId:
        return self.task.task_id

    @property
    def config(self) -> StreamsConfig:
        return self.task.config

    def forward(self, record: Record, child_name: str | None = None) -> None:
        if child_name is None:
            self._fanout(record.key, record.value, record.timestamp, record.headers)
            return
        child = self.children.get(child_name)
        if child is None:
            raise TopologyError(
                f"{self.node_name!r} cannot forward to {child_name!r}: not a child "
                f"(children: {sorted(self.children)})"
            )
        child(record.key, record.value, record.timestamp, record.headers)

    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable:
        return self.task.schedule(self.node_name, interval_ms, punctuation_type, callback)

    def get_state_store(self, name: str) -> Any:
        if name not in self.store_names:
            global_store = self.task.global_stores.get(name)
            if global_store is not None:  # as in Kafka Streams, global stores need no connection
                return global_store
            raise InvalidStateStoreError(
                f"processor {self.node_name!r} has no access to store {name!r}; connect it in the topology"
            )
        store = self.task.stores.get(name)
        if store is None:
            raise InvalidStateStoreError(f"store {name!r} is not initialised in task {self.task.task_id}")
        return store

    def record_metadata(self) -> RecordMetadata | None:
        return self.task.record_metadata()

    def current_stream_time_ms(self) -> int:
        return self.task.stream_time

    def current_system_time_ms(self) -> int:
        return self.task.clock_ms()

    def commit(self) -> None:
        self.task.commit_requested = True


def _fanout(children: list[Forward]) -> Forward:
    """One callable that calls every child; specialised for the common 0/1/2 cases."""
    if not children:
        return _drop
    if len(children) == 1:
        return children[0]
    if len(children) == 2:
        first, second = children

        def two(key: Any, value: Any, timestamp: int, headers: Headers) -> None:
            first(key, value, timestamp, headers)
            second(key, value, timestamp, headers)

        return two

    def many(key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        for child in children:
            child(key, value, timestamp, headers)

    return many


def _drop(key: Any, value: Any, timestamp: int, headers: Headers) -> None:
    """Terminal: nothing downstream."""
