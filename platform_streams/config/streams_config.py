"""``StreamsConfig``: every setting of a platform_streams application, validated once.

Why a frozen pydantic model: a Streams application is configured once and then read from
many threads, so it must be immutable, and a wrong value must fail at start-up with the
field's name instead of deep inside librdkafka minutes later. Keys mirror Java Kafka
Streams (``application.id`` -> ``application_id``) so that an existing
``streams.properties`` file loads unchanged through :meth:`StreamsConfig.from_properties`.

The model itself never talks to Kafka: :meth:`StreamsConfig.consumer_configs` and friends
return plain librdkafka dicts which ``platform_streams.kafka`` turns into clients. That
keeps the settings we *must* force (manual commits, no auto topic creation, the range
assignor for co-partitioning, read_committed under EOS) in one reviewable place. Java
keys, files and environment variables are translated by :mod:`platform_streams.config.sources`;
:mod:`platform_streams.config.layers` names the layers and checks pass-through client keys
with librdkafka (the model checks them too, for configs built in Python).
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core.core_schema import SerializationInfo

from platform_streams.config.layers import Layers, client_key_problem, named_layers
from platform_streams.config.rocksdb import parse_byte_size, resolve_config_setter
from platform_streams.config.secret_keys import is_secret_key, remember_settings
from platform_streams.config.sources import CLIENT_FIELDS, env_values, merge, normalize, read_file
from platform_streams.errors import StreamsConfigError
from platform_streams.serde import Serde, serde_from_name

if TYPE_CHECKING:
    from platform_streams.state.dsl_store_suppliers import DslStoreSuppliers

__all__ = ["ExceptionHandlerSpec", "Layers", "StreamsConfig", "is_secret_key"]

ClientValue = str | int | float | bool
ClientDict = dict[str, ClientValue]
HandlerChoice = Literal["log_and_fail", "log_and_continue"]
#: A built-in policy name, or a callable the runtime invokes with the failure context.
ExceptionHandlerSpec = HandlerChoice | Callable[..., Any]

_NAME_RE = re.compile(r"[a-zA-Z0-9._-]+")
#: Kafka topic names are at most 249 characters, and the longest internal topic Kafka Streams
#: names itself is ``<application.id>-KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000000-changelog``
#: (61 characters after the id): a longer id makes an application whose topics cannot exist
#: (and a state directory name near the file system's 255-byte limit)
MAX_APPLICATION_ID_LENGTH = 249 - 61
# What Java's Integer.parseInt/Long.parseLong read (Kafka's ConfigDef trims first); Python's
# int() also takes "1_0", which would run ten threads where Java refuses the setting.
_JAVA_INT_RE = re.compile(r"[+-]?[0-9]+")
_MASK = "******"
_TOKEN_RE = re.compile(r"[\x21-\x7e]+")

# Java handler class names (and their simple names) -> built-in policy.
_JAVA_HANDLERS: dict[str, HandlerChoice] = {
    "logandcontinueexceptionhandler": "log_and_continue",
    "logandcontinueprocessingexceptionhandler": "log_and_continue",
    "logandfailexceptionhandler": "log_and_fail",
    "logandfailprocessingexceptionhandler": "log_and_fail",
    "defaultproductionexceptionhandler": "log_and_fail",
}


def _check_host_port(value: str, what: str) -> str:
    """Validate ``host:port`` (``[v6]:port`` and a ``proto://`` prefix allowed); return trimmed."""
    text = value.strip()
    bare = text.split("://", 1)[1] if "://" in text else text
    host, sep, port = bare.rpartition(":")
    if not sep or not host or host in ("[]",) or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} must be 'host:port' with a numeric port 1-65535, got {value!r}")
    return text


def _none_passes(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Let ``None`` through unvalidated so a model validator can replace it with a default."""
    return None if value is None else handler(value)


def _is_int_field(annotation: Any) -> bool:
    """``int`` or ``int | None`` (not a union that also takes text)."""
    args = getattr(annotation, "__args__", None) or ()
    return annotation is int or (int in args and str not in args)


def _mask_secrets(values: Mapping[str, ClientValue]) -> dict[str, ClientValue]:
    """Copy a client dict with the value of every secret-looking key masked (for logs)."""
    return {k: _MASK if is_secret_key(k) else v for k, v in values.items()}


class _Masked:
    """A secret setting's raw value with a ``repr`` that never shows it: pydantic prints the
    rejected input in its errors, and a token given as a list or with a typo is still a token."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"<a {type(self.value).__name__}, not shown>"


def _mask_secret_input(value: Any) -> Any:
    return None if value is None else _Masked(value)


def _check_token(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """``http_auth_token``: visible ASCII, surrounding whitespace (a file's newline) trimmed.

    An empty token is refused: ``Authorization: Bearer`` with nothing after it would match it.
    """
    raw = value.value if isinstance(value, _Masked) else value
    if raw is None:
        return None
    text = raw.get_secret_value() if isinstance(raw, SecretStr) else raw
    if not isinstance(text, str):
        raise ValueError(f"must be a string, not a {type(text).__name__}")
    token = text.strip()
    if not token:
        raise ValueError("must not be empty (unset it to serve without a token)")
    if not _TOKEN_RE.fullmatch(token):
        raise ValueError("must be visible ASCII without spaces (it is sent in an HTTP header)")
    return handler(token)


#: Kafka Streams' individual optimizations (``StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG``)
TOPOLOGY_OPTIMIZATIONS = ("reuse.ktable.source.topics", "merge.repartition.topics", "single.store.self.join")


def _resolve_processor_wrapper(value: Any) -> Any:
    # imported when a wrapper is set: the processor package imports this module's users
    from platform_streams.processor.wrapper import resolve_processor_wrapper

    return resolve_processor_wrapper(value)


class StreamsConfig(BaseModel):
    """Validated, immutable settings of one Streams application (see the module docstring).

    Every member of an application must be started with the same values for the group
    membership timeouts and ``processing_guarantee``; they are fields rather than free
    client overrides so that they are validated and visible in :meth:`redacted` output.
    """

    # hide_input_in_errors: a failed check's input may be a credential, and a cross-field
    # check's input is every setting (the CLI's own rendering is in cli_app_loader)
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
        validate_default=True,
        hide_input_in_errors=True,
    )

    # --- identity & connection ---------------------------------------------------------
    application_id: str = Field(description="Consumer group id and prefix of internal topics.")
    bootstrap_servers: str = Field(description="Comma-separated host:port list.")
    client_id: str | None = Field(
        default=None, min_length=1, description="Client id prefix; generated if unset."
    )
    application_server: str | None = Field(default=None, description="host:port for interactive queries.")
    client_rack: str | None = Field(
        default=None,
        description="The consumers' client.rack (KIP-392: fetch from a replica in the same zone); "
        "the Helm chart sets it to the pod's zone. Empty means unset.",
    )
    state_dir: Path = Path(tempfile.gettempdir()) / "platform-streams"
    state_snapshot_location: str | None = Field(
        default=None,
        description="Where Spark-made state snapshots live (a path); restores start from them when set.",
    )
    state_snapshot_truncate_changelogs: bool = Field(
        default=False,
        description="Changelogs bounded by snapshots: 'platform-streams snapshot truncate' may delete "
        "changelog records below each partition's newest snapshot (DeleteRecords), and standby "
        "tasks start from snapshots too. Needs state_snapshot_location on every client "
        "(docs/spark.md, 'Changelogs bounded by snapshots').",
    )

    # --- processing ------------------------------------------------------------------
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = "at_least_once"
    # None (unset) becomes 30000, or 100 under exactly_once_v2, in ``_cross_field``.
    commit_interval_ms: Annotated[int, Field(ge=0), WrapValidator(_none_passes)] = None  # type: ignore[assignment]
    poll_ms: int = Field(default=100, gt=0)
    num_stream_threads: int = Field(default=1, ge=1)
    num_standby_replicas: int = Field(default=0, ge=0)
    statestore_cache_max_bytes: int = Field(default=10 * 1024 * 1024, ge=0)
    #: Kafka's ``rocksdb.config.setter``: ``setter(store_name, options, table)`` called for
    #: each RocksDB store (and each of its segments) before it opens, with its rocksdict
    #: ``Options`` and ``BlockBasedOptions``; a callable, a class (instantiated) or a dotted
    #: path "package.module.name" (docs/memory.md has recipes)
    rocksdb_config_setter: Annotated[Any, BeforeValidator(resolve_config_setter)] = None
    #: off-heap memory of all RocksDB stores of the process: one block cache of this size with
    #: the memtables charged to it ("256MiB", "1Gi" or bytes); unset: unbounded. The record
    #: cache (statestore_cache_max_bytes) is a separate budget (docs/memory.md)
    rocksdb_memory_budget: Annotated[int, BeforeValidator(parse_byte_size), Field(gt=0)] | None = None
    buffered_records_per_partition: int = Field(default=1000, gt=0)
    max_task_idle_ms: int = Field(default=0, ge=-1)
    task_timeout_ms: int = Field(default=300_000, ge=0)
    #: Kafka's ``topology.optimization``: "none", "all", or a comma-separated list of
    #: "reuse.ktable.source.topics", "merge.repartition.topics", "single.store.self.join"
    topology_optimization: str = "none"
    #: Kafka's ``ensure.explicit.internal.resource.naming`` (KIP-1111): ``build()`` refuses a
    #: topology whose store, changelog or repartition topic has a generated name (which adding
    #: an operator upstream would change); off, it logs them in one WARN
    ensure_explicit_internal_resource_naming: bool = False
    #: Kafka's ``processor.wrapper.class`` (KIP-1112): a ProcessorWrapper (instance, class or
    #: dotted path) given the supplier of every processor, DSL and Processor API; a class is
    #: made and configured with these settings once per topology
    processor_wrapper: Annotated[Any, BeforeValidator(_resolve_processor_wrapper)] = None
    # Names are resolved to instances by ``_resolve_serde`` (validate_default covers defaults).
    default_key_serde: Serde = Field(default="bytes")  # type: ignore[assignment]
    default_value_serde: Serde = Field(default="bytes")  # type: ignore[assignment]
    #: Kafka's ``dsl.store.suppliers.class`` (KIP-954): where every DSL store without a
    #: supplier of its own (``Materialized``/``StreamJoined``) lives. A DslStoreSuppliers
    #: instance or class, or a class name ("InMemoryDslStoreSuppliers", Java's full name);
    #: unset: ``default_dsl_store`` decides. Applies to ``StreamsBuilder(config)``.
    dsl_store_suppliers: Any = None
    #: Kafka's older ``default.dsl.store``: "rocksDB" or "in_memory" (used when
    #: ``dsl_store_suppliers`` is unset, as Kafka's ``TopologyConfig`` does)
    default_dsl_store: Literal["rocksDB", "in_memory"] = "rocksDB"

    #: Kafka's internal (private API) ``__emit.interval.ms.kstreams.windowed.aggregation__``:
    #: an ``on_window_close()`` aggregation checks for closed windows at most once per this
    #: many ms of wall clock (the windows closed meanwhile are emitted at the next check).
    #: 0: at every record, as Kafka's TopologyTestDriver sets it; KafkaStreams' default is 1000
    emit_interval_ms_kstreams_windowed_aggregation: int = Field(default=0, ge=0)
    #: Kafka's internal ``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__``: a
    #: left/outer stream-stream join scans its outer-join store for unmatched records whose
    #: window closed at most once per this many ms of wall clock; 0 as above (Kafka: 1000)
    emit_interval_ms_kstreams_outer_join_spurious_results_fix: int = Field(default=0, ge=0)

    # --- error handling --------------------------------------------------------------
    deserialization_exception_handler: ExceptionHandlerSpec = "log_and_fail"
    processing_exception_handler: ExceptionHandlerSpec = "log_and_fail"
    production_exception_handler: ExceptionHandlerSpec = "log_and_fail"
    errors_dead_letter_queue_topic_name: str | None = None

    # --- internal topics, standbys, metrics -------------------------------------------
    replication_factor: int = -1
    # Kafka Streams' repartition.purge.interval.ms: consumed repartition records are deleted
    # (DeleteRecords) at most this often after a commit, on brokers that support it.
    repartition_purge_interval_ms: int = Field(default=30_000, ge=0)
    acceptable_recovery_lag: int = Field(default=10_000, ge=0)
    probing_rebalance_interval_ms: int = Field(
        default=600_000, ge=1_000, description="Kafka requires >= 60000; shorter values are for tests."
    )
    task_assignor: Literal["state_aware", "range"] = Field(
        default="state_aware",
        description="'state_aware': KIP-441 placement computed by the clients "
        "(runtime/task_assignment); 'range': the consumer group's range assignor.",
    )
    group_protocol: Literal["classic", "streams"] = Field(
        default="classic",
        description="Kafka's group.protocol. 'streams': the broker's streams group (KIP-1071, "
        "Kafka 4.2+) keeps the members and assigns the tasks (docs/streams-groups.md); "
        "'classic': this library's own placement over the consumer group.",
    )
    rebalance_protocol: Literal["eager", "cooperative"] = Field(
        default="eager",
        description="With task_assignor='state_aware': 'cooperative' keeps the tasks that do not "
        "move processing through a rebalance (commits wait for the new generation; a moving "
        "task is released, then started by its new owner in a follow-up rebalance; "
        "docs/scale-out.md); 'eager' stops every task for every rebalance.",
    )
    member_slots: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="With task_assignor='state_aware': partitions of the '<application_id>-members' "
        "topic, the most group members (stream threads of all instances together) whose "
        "reports a generation's placement waits for; an existing smaller topic is grown where "
        "the broker allows (CreatePartitions; docs/scale-out.md, 'Membership').",
    )
    max_warmup_replicas: int = Field(default=2, ge=1)
    client_tags: dict[str, str] = Field(
        default_factory=dict, description="KIP-708 tags of this client, e.g. {'zone': 'eu-1a'}."
    )
    rack_aware_assignment_tags: list[str] = Field(
        default_factory=list,
        description="Tag keys standbys are spread over (default: 'rack', from client.rack).",
    )
    rack_aware_assignment_strategy: Literal["none", "min_traffic", "balance_subtopology"] = Field(
        default="none",
        description="KIP-925 rack-aware active task placement: 'min_traffic' places active tasks "
        "to minimize the input partitions read from another rack (client.rack against the "
        "replicas' broker.rack), each client keeping its task count; 'balance_subtopology' also "
        "spreads each sub-topology's tasks; 'none' leaves the placement alone. Needs client_rack "
        "on every client and a rack on every broker (docs/scale-out.md).",
    )
    rack_aware_assignment_traffic_cost: int | None = Field(
        default=None,
        ge=0,
        description="Cost of one cross-rack input partition of a stateful task (unset: 10).",
    )
    rack_aware_assignment_non_overlap_cost: int | None = Field(
        default=None,
        ge=0,
        description="Cost of moving a stateful task off the balanced placement's client (unset: 1).",
    )
    metrics_recording_level: Literal["INFO", "DEBUG", "TRACE"] = "INFO"
    fusion: bool = Field(
        default=True,
        description="Compile stateless chains into one generated function per source (fast); "
        "False runs every node as a plain closure, for stepping through in a debugger.",
    )

    # --- worker HTTP endpoint: /metrics, /health, /state, interactive queries ----------
    http_host: str = Field(default="127.0.0.1", min_length=1, description="Address the endpoint binds to.")
    http_port: int | None = Field(
        default=None, ge=0, le=65535, description="None: no endpoint; 0: any free port (see the log)."
    )
    # wrap runs inside before: the check only ever sees (and errors only ever print) the masked input
    http_auth_token: Annotated[
        SecretStr | None, WrapValidator(_check_token), BeforeValidator(_mask_secret_input)
    ] = Field(default=None, description="Bearer token the endpoint requires (not for /health/*).")

    # --- group membership (identical on every member) ----------------------------------
    session_timeout_ms: int = Field(default=45_000, gt=0)
    heartbeat_interval_ms: int = Field(default=3_000, gt=0)
    max_poll_interval_ms: int = Field(default=300_000, gt=0)
    group_instance_id: str | None = Field(default=None, min_length=1)

    # --- librdkafka pass-through (per-client dicts are applied last) --------------------
    client_config: ClientDict = Field(default_factory=dict)
    consumer_config: ClientDict = Field(default_factory=dict)
    producer_config: ClientDict = Field(default_factory=dict)
    admin_config: ClientDict = Field(default_factory=dict)

    _client_suffix: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex[:8])
    _commit_interval_defaulted: bool = PrivateAttr(default=False)

    # ------------------------------------------------------------------ validators

    @model_validator(mode="before")
    @classmethod
    def _remember_secrets(cls, data: Any) -> Any:
        # before any check can quote them: see config/secret_keys.py
        if isinstance(data, Mapping):
            remember_settings(data)
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _java_integers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, str) and field is not None and _is_int_field(field.annotation):
            if not _JAVA_INT_RE.fullmatch(value.strip()):
                raise ValueError(f"{info.field_name} must be a whole number written in digits, got {value!r}")
            return int(value.strip())
        return value

    @field_validator("application_id")
    @classmethod
    def _check_application_id(cls, value: str) -> str:
        if not _NAME_RE.fullmatch(value):
            raise ValueError(
                f"application_id must match [a-zA-Z0-9._-]+ (it prefixes internal topic names), got {value!r}"
            )
        if value in (".", ".."):
            # Kafka refuses these topic names; here the application's state directory,
            # <state_dir>/<application_id>, would be state_dir itself or its parent
            raise ValueError(
                f"application_id must not be {value!r} (its state directory would not be its own)"
            )
        if len(value) > MAX_APPLICATION_ID_LENGTH:
            raise ValueError(
                f"application_id must be at most {MAX_APPLICATION_ID_LENGTH} characters (its internal "
                f"topics' names must fit Kafka's 249), got {len(value)}"
            )
        return value

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_bootstrap(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",")]
        if not value.strip() or any(not p for p in parts):
            raise ValueError(f"bootstrap_servers must be a comma-separated host:port list, got {value!r}")
        return ",".join(_check_host_port(p, "every bootstrap_servers entry") for p in parts)

    @field_validator("application_server")
    @classmethod
    def _check_application_server(cls, value: str | None) -> str | None:
        return None if value is None else _check_host_port(value, "application_server")

    @field_validator("state_dir", mode="after")
    @classmethod
    def _expand_state_dir(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("processing_guarantee", mode="before")
    @classmethod
    def _check_guarantee(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("exactly_once", "exactly_once_beta"):
            raise ValueError(
                f"processing_guarantee {value!r} was removed from Kafka Streams; use 'exactly_once_v2'"
            )
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("topology_optimization", "metrics_recording_level", mode="before")
    @classmethod
    def _fold_case(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        return (
            value.strip().upper() if info.field_name == "metrics_recording_level" else value.strip().lower()
        )

    @field_validator("topology_optimization")
    @classmethod
    def _check_optimization(cls, value: str) -> str:
        if value in ("none", "all"):
            return value
        names = [name.strip() for name in value.split(",")]
        unknown = [name for name in names if name not in TOPOLOGY_OPTIMIZATIONS]
        if unknown or not names:
            raise ValueError(
                f"topology_optimization {value!r}: use 'none', 'all' or a comma-separated list of "
                f"{', '.join(TOPOLOGY_OPTIMIZATIONS)}"
            )
        return ",".join(names)

    @field_validator("default_key_serde", "default_value_serde", mode="before")
    @classmethod
    def _resolve_serde(cls, value: Any) -> Serde:
        try:
            return serde_from_name(value)
        except (ValueError, TypeError) as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("dsl_store_suppliers", mode="before")
    @classmethod
    def _resolve_dsl_store_suppliers(cls, value: Any) -> Any:
        from platform_streams.state.dsl_store_suppliers import dsl_store_suppliers_from

        try:
            return dsl_store_suppliers_from(value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"dsl_store_suppliers: {exc}") from exc

    def resolved_dsl_store_suppliers(self) -> DslStoreSuppliers:
        """Kafka's ``TopologyConfig.resolveDslStoreSuppliers``: ``dsl_store_suppliers`` if set,
        else the built-in suppliers ``default_dsl_store`` names."""
        from platform_streams.state.dsl_store_suppliers import BuiltInDslStoreSuppliers

        if self.dsl_store_suppliers is not None:
            return self.dsl_store_suppliers
        if self.default_dsl_store == "in_memory":
            return BuiltInDslStoreSuppliers.IN_MEMORY
        return BuiltInDslStoreSuppliers.ROCKS_DB

    @field_validator(
        "deserialization_exception_handler",
        "processing_exception_handler",
        "production_exception_handler",
        mode="before",
    )
    @classmethod
    def _resolve_handler(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            text = value.strip()
            simple = text.rsplit(".", 1)[-1].rsplit("$", 1)[-1].lower()
            choice = _JAVA_HANDLERS.get(simple, text.lower())
            if choice not in ("log_and_fail", "log_and_continue"):
                raise ValueError(
                    f"{info.field_name} must be 'log_and_fail', 'log_and_continue', a Java "
                    f"LogAndFail/LogAndContinue handler class name or a callable, got {value!r}"
                )
            return choice
        return value

    @field_validator("errors_dead_letter_queue_topic_name")
    @classmethod
    def _check_dlq_topic(cls, value: str | None) -> str | None:
        if value is not None and (not _NAME_RE.fullmatch(value) or len(value) > 249):
            raise ValueError(f"errors_dead_letter_queue_topic_name is not a legal topic name: {value!r}")
        return value

    @field_validator("replication_factor")
    @classmethod
    def _check_replication(cls, value: int) -> int:
        if value == 0 or value < -1:
            raise ValueError(f"replication_factor must be -1 (broker default) or >= 1, got {value}")
        return value

    @field_validator(*CLIENT_FIELDS, mode="before")
    @classmethod
    def _check_client_keys(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, Mapping):
            for key in value:
                if not isinstance(key, str) or not key or any(ch.isspace() for ch in key):
                    raise ValueError(
                        f"client property names must be non-empty strings without spaces: {key!r}"
                    )
                problem = client_key_problem(
                    info.field_name or "client_config", key, value[key], fields=cls.model_fields
                )
                if problem is not None:
                    raise ValueError(f"{key!r}: {problem}")
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> Self:
        if self.commit_interval_ms is None:
            default = 100 if self.processing_guarantee == "exactly_once_v2" else 30_000
            # Frozen model: the resolved default is written once, during validation.
            object.__setattr__(self, "commit_interval_ms", default)
            self._commit_interval_defaulted = True
        if self.state_snapshot_truncate_changelogs and not self.state_snapshot_location:
            raise ValueError(
                "state_snapshot_truncate_changelogs needs state_snapshot_location: a client that "
                "cannot read snapshots cannot restore a changelog truncated below them"
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        if self.max_poll_interval_ms < self.session_timeout_ms:
            raise ValueError(
                f"max_poll_interval_ms ({self.max_poll_interval_ms}) must be >= "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        return self

    # ------------------------------------------------------------------ serialization

    @field_serializer("default_key_serde", "default_value_serde")
    def _dump_serde(self, value: Serde, info: SerializationInfo) -> Any:
        return repr(value) if info.mode == "json" else value

    @field_serializer(
        "deserialization_exception_handler",
        "processing_exception_handler",
        "production_exception_handler",
        "rocksdb_config_setter",
        "processor_wrapper",
    )
    def _dump_handler(self, value: Any, info: SerializationInfo) -> Any:
        if info.mode != "json" or isinstance(value, str):
            return value
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"

    @field_serializer(*CLIENT_FIELDS)
    def _dump_client(self, value: ClientDict, info: SerializationInfo) -> ClientDict:
        # JSON is the "print it" form and must not leak credentials; python-mode dumps keep
        # the real values so that a config can be rebuilt from them.
        return _mask_secrets(value) if info.mode == "json" else dict(value)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, _mask_secrets(value) if name in CLIENT_FIELDS else value

    def __eq__(self, other: object) -> bool:
        # Field values only: the generated client-id suffix must not make equal settings differ.
        if not isinstance(other, StreamsConfig):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), self.application_id, self.bootstrap_servers))

    def redacted(self) -> dict[str, Any]:
        """All settings as a JSON-friendly dict with secrets masked: what to log at start-up."""
        data = self.model_dump(mode="json")
        data["effective_client_id"] = self.effective_client_id
        return data

    # ------------------------------------------------------------------ derived values

    @property
    def effective_client_id(self) -> str:
        """``client_id``, or ``<application_id>-<8 hex chars>`` stable for this instance."""
        return self.client_id or f"{self.application_id}-{self._client_suffix}"

    @property
    def exactly_once(self) -> bool:
        """True under ``exactly_once_v2`` (transactions, read_committed, short commits)."""
        return self.processing_guarantee == "exactly_once_v2"

    def with_overrides(self, **overrides: Any) -> StreamsConfig:
        """A re-validated copy with ``overrides`` applied (field names, not dotted keys).

        Values that were defaulted stay defaulted, so e.g. switching to exactly_once_v2
        also switches the derived commit interval; the generated client-id suffix is kept.
        """
        data = {name: getattr(self, name) for name in self.model_fields_set}
        if self._commit_interval_defaulted:
            data.pop("commit_interval_ms", None)
        for key in CLIENT_FIELDS:
            if key in data:
                data[key] = dict(data[key])
        data.update(overrides)
        new = type(self).model_validate(data)
        new._client_suffix = self._client_suffix
        return new

    # ------------------------------------------------------------------ librdkafka dicts

    def _thread_client_id(self, worker_index: int, role: str) -> str:
        if worker_index < 0:
            raise ValueError(f"worker_index must be >= 0, got {worker_index}")
        return f"{self.effective_client_id}-StreamThread-{worker_index + 1}-{role}"

    def _rack_config(self) -> dict[str, Any]:
        # The Downward API hands an empty string to a pod whose node has no zone label.
        return {"client.rack": self.client_rack} if self.client_rack else {}

    def consumer_configs(self, worker_index: int = 0) -> dict[str, Any]:
        """librdkafka settings of the main (group) consumer of worker ``worker_index`` (0-based).

        Offsets are committed by the runtime only after processing (and, under EOS, inside
        the transaction), hence no auto commit/store. The ``range`` assignor gives one
        member the same partition number of every co-partitioned topic, which joins need.
        """
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.application_id,
            "client.id": self._thread_client_id(worker_index, "consumer"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
            "partition.assignment.strategy": "range",
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_interval_ms,
            "max.poll.interval.ms": self.max_poll_interval_ms,
            # librdkafka defaults to read_committed (Java to read_uncommitted): be explicit.
            "isolation.level": "read_committed" if self.exactly_once else "read_uncommitted",
            "fetch.wait.max.ms": 100,
            # Measured to double consumer throughput versus the 1000 ms default.
            "fetch.queue.backoff.ms": 10,
        }
        if self.group_instance_id is not None:
            suffix = f"-{worker_index + 1}" if worker_index > 0 else ""
            conf["group.instance.id"] = f"{self.group_instance_id}{suffix}"
        conf.update(self._rack_config())
        conf.update(self.client_config)
        conf.update(self.consumer_config)
        return conf

    def restore_consumer_configs(self, worker_index: int = 0) -> dict[str, Any]:
        """Settings of the group-less consumer that replays changelogs into state stores.

        It must never join the application's group (that would trigger rebalances), so
        ``group.id``/``group.instance.id`` are removed even if an override supplies them.
        """
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self._thread_client_id(worker_index, "restore-consumer"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
            "isolation.level": "read_committed" if self.exactly_once else "read_uncommitted",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 10,
        }
        conf.update(self._rack_config())
        conf.update(self.client_config)
        conf.update(self.consumer_config)
        conf.pop("group.id", None)
        conf.pop("group.instance.id", None)
        return conf

    def producer_configs(self, worker_index: int = 0, transactional_id: str | None = None) -> dict[str, Any]:
        """Settings of the producer of worker ``worker_index``; transactional under EOS.

        ``murmur2_random`` places keys on the same partitions as the Java client, so
        repartition topics and sinks are interchangeable with Java applications.
        """
        if transactional_id is not None and not self.exactly_once:
            raise StreamsConfigError(
                "transactional_id is only valid with processing_guarantee=exactly_once_v2"
            )
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self._thread_client_id(worker_index, "producer"),
            "partitioner": "murmur2_random",
            "linger.ms": 100,
            "acks": "all",
        }
        if self.exactly_once:
            conf["enable.idempotence"] = True
            if transactional_id is not None:
                conf["transactional.id"] = transactional_id
        conf.update(self.client_config)
        conf.update(self.producer_config)
        return conf

    def admin_configs(self) -> dict[str, Any]:
        """Settings of the admin client (internal topic creation, metadata, record deletion)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": f"{self.effective_client_id}-admin",
        }
        conf.update(self.client_config)
        conf.update(self.admin_config)
        return conf

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | str | os.PathLike[str]) -> StreamsConfig:
        """Build from Java-style settings: a mapping, a ``.properties`` file or a YAML file.

        Dotted Kafka Streams keys map to fields (``application.id`` -> ``application_id``);
        ``consumer.``/``main.consumer.``/``restore.consumer.``/``producer.``/``admin.``
        prefixed keys go to the per-client dicts, other dotted keys (``security.protocol``)
        to ``client_config``. String values are coerced by field validation.
        """
        data = props if isinstance(props, Mapping) else read_file(Path(props))
        return cls.model_validate(normalize(data, cls.model_fields))

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] = os.environ,
        prefix: str = "PLATFORM_STREAMS_",
        base: Mapping[str, Any] | None = None,
    ) -> StreamsConfig:
        """Build from ``<prefix><FIELD_NAME>`` variables merged over ``base`` (e.g. a file)."""
        fields = cls.model_fields
        return cls.model_validate(merge(normalize(base or {}, fields), env_values(env, prefix, fields)))

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] = os.environ,
        overrides: Mapping[str, Any] | None = None,
        *,
        defaults: Mapping[str, Any] | None = None,
    ) -> StreamsConfig:
        """The settings as the CLI layers them: ``defaults`` (an app factory's settings), the file (if
        any), then environment variables, then overrides.

        Later layers win per key; the client dicts are merged key by key, so e.g. a CLI
        ``client_config`` override adds to the file's ``security.protocol``.
        """
        return cls.from_layers(named_layers(path, env, overrides, defaults, cls.model_fields))

    @classmethod
    def from_layers(cls, layers: Layers) -> StreamsConfig:
        """Merge ``layers`` (later ones win per key, client dicts key by key) and validate."""
        data: dict[str, Any] = {}
        for _name, values in layers:
            data = merge(data, values)
        return cls.model_validate(data)
