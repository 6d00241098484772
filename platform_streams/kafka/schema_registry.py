"""Schema Registry serdes: Avro, Protobuf and JSON Schema in the Confluent wire format.

Built on ``confluent_kafka.schema_registry`` (its registry client and serializers), so the
wire format (magic byte, schema id, payload), subject naming and schema lookup are the ones
every Java/Connect producer and consumer uses; nothing here encodes bytes itself.

A serializer needs the topic it writes to (the subject is derived from it); a serde is bound
to one with ``topic=`` or :meth:`RegistrySerde.for_topic`. Deserialization reads the schema id
from the bytes, so any topic works. Credentials live in :class:`RegistrySettings` and are
never part of a repr, a name or an error message.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from platform_streams.errors import DeserializationError, SerializationError, StreamsConfigError
from platform_streams.serde.base import Serde

__all__ = [
    "Avro",
    "JsonSchema",
    "Protobuf",
    "RegistrySerde",
    "RegistrySettings",
    "SubjectStrategy",
    "delete_subjects_of_topics",
    "subjects_of_topics",
]

SubjectStrategy = Literal["topic", "record", "topic_record"]

_STRATEGIES: dict[str, Callable[[SerializationContext, str | None], str | None]] = {
    "topic": topic_subject_name_strategy,
    "record": record_subject_name_strategy,
    "topic_record": topic_record_subject_name_strategy,
}


@dataclasses.dataclass(frozen=True)
class RegistrySettings:
    """Where the registry is and how to log in: ``basic_auth_user_info`` is ``user:password``
    (Confluent's ``basic.auth.user.info``), kept out of repr and every message."""

    url: str
    basic_auth_user_info: str | None = dataclasses.field(default=None, repr=False)
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StreamsConfigError("schema.registry.url must be an http(s) URL")
        if parts.username is not None or parts.password is not None:
            # a URL is printed in logs and errors; credentials belong in basic_auth_user_info
            raise StreamsConfigError(
                "schema.registry.url must not hold credentials: use basic.auth.user.info"
            )
        if self.basic_auth_user_info is not None and ":" not in self.basic_auth_user_info:
            raise StreamsConfigError("basic.auth.user.info must be user:password")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RegistrySettings:
        """From Confluent-style keys: ``schema.registry.url``, ``basic.auth.user.info``."""
        url = config.get("schema.registry.url")
        if not url:
            raise StreamsConfigError("schema.registry.url is not set")
        user_info = config.get("schema.registry.basic.auth.user.info") or config.get("basic.auth.user.info")
        return cls(str(url), str(user_info) if user_info else None)

    def client_conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"url": self.url, "timeout": self.timeout_s}
        if self.basic_auth_user_info is not None:
            conf["basic.auth.user.info"] = self.basic_auth_user_info
        return conf


_clients: dict[RegistrySettings, SchemaRegistryClient] = {}
_clients_lock = threading.Lock()


def registry_client(settings: RegistrySettings) -> SchemaRegistryClient:
    """One client (and so one schema cache) per registry and login, shared by all serdes."""
    with _clients_lock:
        client = _clients.get(settings)
        if client is None:
            client = _clients[settings] = SchemaRegistryClient(settings.client_conf())
        return client


def _to_dict() -> Callable[[Any, SerializationContext], Any]:
    def convert(obj: Any, _ctx: SerializationContext) -> Any:
        if isinstance(obj, dict):
            return obj
        dump = getattr(obj, "model_dump", None)  # pydantic
        if callable(dump):
            return dump()
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return dataclasses.asdict(obj)
        return vars(obj)

    return convert


def _from_dict(value_class: type | None) -> Callable[[Any, SerializationContext], Any] | None:
    if value_class is None:
        return None
    validate = getattr(value_class, "model_validate", None)  # pydantic
    if callable(validate):
        return lambda data, _ctx: validate(data)
    return lambda data, _ctx: value_class(**data)


class RegistrySerde(Serde):
    """The common part of :class:`Avro`, :class:`Protobuf` and :class:`JsonSchema`."""

    kind = "registry"
    __slots__ = (
        "_deserializer",
        "_field",
        "_serializer",
        "auto_register",
        "is_key",
        "name",
        "references",
        "schema",
        "settings",
        "subject_strategy",
        "topic",
        "use_latest_version",
        "value_class",
    )

    def __init__(
        self,
        settings: RegistrySettings | str,
        schema: str | None = None,
        *,
        is_key: bool = False,
        topic: str | None = None,
        subject_strategy: SubjectStrategy = "topic",
        auto_register: bool = True,
        use_latest_version: bool = False,
        references: Sequence[SchemaReference] = (),
        value_class: type | None = None,
    ) -> None:
        if subject_strategy not in _STRATEGIES:
            raise StreamsConfigError(
                f"subject_strategy must be one of {sorted(_STRATEGIES)}, got {subject_strategy!r}"
            )
        self.settings = RegistrySettings(settings) if isinstance(settings, str) else settings
        self.schema = schema
        self.is_key = is_key
        self.topic = topic
        self.subject_strategy = subject_strategy
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self.references = tuple(references)
        self.value_class = value_class
        self.name = f"{self.kind}-registry"
        self._field = MessageField.KEY if is_key else MessageField.VALUE
        self._serializer: Any = None
        self._deserializer: Any = None

    def for_topic(self, topic: str) -> RegistrySerde:
        """This serde writing to ``topic`` (its subject follows from it)."""
        if topic == self.topic:
            return self
        bound = self._copy()
        bound.topic = topic
        return bound

    def _copy(self) -> RegistrySerde:
        return _unpickle_serde(
            type(self), {slot: getattr(self, slot) for slot in self._slots() if slot not in _PER_PROCESS}
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Spark ships the application's serdes to its executors: the settings (login included:
        # the executor logs in too) travel in the pickle, the client and serializers do not --
        # each process makes its own on first use (registry_client), like Java serdes configured
        # in every task. repr() and describe() never show the login (see _params).
        state = {slot: getattr(self, slot) for slot in self._slots() if slot not in _PER_PROCESS}
        return (_unpickle_serde, (type(self), state))

    @classmethod
    def _slots(cls) -> tuple[str, ...]:
        return RegistrySerde.__slots__ + (() if cls is RegistrySerde else cls.__slots__)

    def _conf(self, writing: bool) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "use.latest.version": self.use_latest_version,
            "subject.name.strategy": _STRATEGIES[self.subject_strategy],
        }
        if writing:
            conf["auto.register.schemas"] = self.auto_register
        return conf

    def _schema_arg(self, schema_type: str) -> Schema | str | None:
        if self.schema is None:
            return None
        if not self.references:
            return self.schema
        return Schema(self.schema, schema_type, list(self.references))

    def _make_serializer(self, client: SchemaRegistryClient) -> Any:
        raise NotImplementedError

    def _make_deserializer(self, client: SchemaRegistryClient) -> Any:
        raise NotImplementedError

    def _context(self) -> SerializationContext:
        return SerializationContext(self.topic or "", self._field)

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if self.topic is None and self.subject_strategy != "record":
            raise SerializationError(
                f"{self.name} serde has no topic for its {self.subject_strategy} subject: "
                "pass topic= or use for_topic()"
            )
        try:
            if self._serializer is None:
                self._serializer = self._make_serializer(registry_client(self.settings))
            data: bytes | None = self._serializer(obj, self._context())
            return data
        except SerializationError:
            raise
        except Exception as exc:
            what = f"{self.name} serde cannot encode {type(obj).__name__} for topic {self.topic!r}"
            raise SerializationError(
                f"{what}: {_reason(exc)}",
                topic=self.topic,
            ) from exc

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            if self._deserializer is None:
                self._deserializer = self._make_deserializer(registry_client(self.settings))
            return self._deserializer(data, self._context())
        except Exception as exc:
            raise DeserializationError(
                f"{self.name} serde cannot decode {len(data)} bytes: {_reason(exc)}", topic=self.topic
            ) from exc

    def _params(self) -> tuple[Any, ...]:
        # no credentials: _params drives repr, equality and the topology's describe()
        return (
            self.settings.url,
            self.schema,
            self.is_key,
            self.topic,
            self.subject_strategy,
            self.auto_register,
            self.use_latest_version,
            tuple((r.name, r.subject, r.version) for r in self.references),
            self.value_class,
        )


#: what a serde makes for itself on first use, in each process: never copied nor pickled
_PER_PROCESS = ("_serializer", "_deserializer")


def _unpickle_serde(cls: type[RegistrySerde], state: Mapping[str, Any]) -> RegistrySerde:
    serde = object.__new__(cls)
    for slot, value in state.items():
        setattr(serde, slot, value)
    serde._serializer = serde._deserializer = None
    return serde


def _reason(exc: BaseException) -> str:
    """The cause in one line: the registry's error code and message, or the exception's text."""
    code = getattr(exc, "error_code", None)
    message = getattr(exc, "error_message", None) or str(exc) or type(exc).__name__
    text = f"registry error {code}: {message}" if code is not None and code != -1 else message
    return " ".join(text.split())


class Avro(RegistrySerde):
    """Avro values; decoded as dicts, or as ``value_class`` (pydantic model, dataclass, or any
    class built from keyword arguments). ``schema`` is the writer's (serialize) and reader's
    (deserialize) schema; without it the deserializer uses the writer's schema."""

    kind = "avro"
    __slots__ = ()

    def _make_serializer(self, client: SchemaRegistryClient) -> Any:
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(client, self._schema_arg("AVRO"), _to_dict(), self._conf(True))

    def _make_deserializer(self, client: SchemaRegistryClient) -> Any:
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        return AvroDeserializer(
            client, self._schema_arg("AVRO"), _from_dict(self.value_class), conf=self._conf(False)
        )


class JsonSchema(RegistrySerde):
    """JSON documents validated against a JSON Schema; decoded as dicts or ``value_class``."""

    kind = "json_schema"
    __slots__ = ()

    def _make_serializer(self, client: SchemaRegistryClient) -> Any:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        return JSONSerializer(self._schema_arg("JSON"), client, _to_dict(), self._conf(True))

    def _make_deserializer(self, client: SchemaRegistryClient) -> Any:
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        return JSONDeserializer(
            self._schema_arg("JSON"),
            _from_dict(self.value_class),
            schema_registry_client=client,
            conf=self._conf(False),
        )


class Protobuf(RegistrySerde):
    """Protobuf messages of the generated class ``message_type``; ``as_dict=True`` decodes to
    dicts (field names as in the .proto). The schema comes from the class (with its imports
    registered as references)."""

    kind = "protobuf"
    __slots__ = ("as_dict", "message_type")

    def __init__(
        self,
        settings: RegistrySettings | str,
        message_type: type,
        *,
        as_dict: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(settings, None, **options)
        self.message_type = message_type
        self.as_dict = as_dict

    def serialize(self, obj: Any) -> bytes | None:
        if isinstance(obj, dict):
            from google.protobuf import json_format

            obj = json_format.ParseDict(obj, self.message_type())
        return super().serialize(obj)

    def deserialize(self, data: bytes | None) -> Any:
        message = super().deserialize(data)
        if message is None or not self.as_dict:
            return message
        from google.protobuf import json_format

        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    def _make_serializer(self, client: SchemaRegistryClient) -> Any:
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        return ProtobufSerializer(self.message_type, client, self._conf(True))

    def _make_deserializer(self, client: SchemaRegistryClient) -> Any:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        return ProtobufDeserializer(self.message_type, self._conf(False), schema_registry_client=client)

    def _params(self) -> tuple[Any, ...]:
        return (*super()._params(), self.message_type, self.as_dict)


#: what follows ``<topic>-`` in a subject of the topic-record strategy: an Avro/Protobuf full name
_RECORD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def subjects_of_topics(subjects: Sequence[str], topics: Sequence[str]) -> list[str]:
    """The subjects a serde writing ``topics`` registers: ``<topic>-key``, ``<topic>-value``
    and ``<topic>-<record full name>`` (topic-record strategy); a record-strategy subject
    (the bare record name) may be shared with other topics and is never one of them."""
    chosen = []
    for subject in subjects:
        for topic in topics:
            rest = subject[len(topic) + 1 :] if subject.startswith(f"{topic}-") else None
            if rest is not None and (rest in ("key", "value") or _RECORD_NAME.fullmatch(rest)):
                chosen.append(subject)
                break
    return chosen


def delete_subjects_of_topics(
    settings: RegistrySettings, topics: Sequence[str], *, permanent: bool = True
) -> list[str]:
    """Delete the subjects of ``topics`` (:func:`subjects_of_topics`): a soft delete (the
    registry keeps the schemas and can bring the subject back), then, when ``permanent``, the
    hard delete the registry only allows after it; returns the subjects deleted."""
    client = registry_client(settings)
    doomed = subjects_of_topics(client.get_subjects(), topics)
    for subject in doomed:
        client.delete_subject(subject, permanent=False)
        if permanent:
            client.delete_subject(subject, permanent=True)
    return doomed
