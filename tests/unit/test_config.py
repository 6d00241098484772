"""StreamsConfig: defaults, validation messages, loaders, client dicts and redaction."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.serde import Bytes, Long, Serde, String

BASE: dict[str, Any] = {"application_id": "app", "bootstrap_servers": "localhost:9092"}


def make(**kw: Any) -> StreamsConfig:
    return StreamsConfig(**{**BASE, **kw})


# ----------------------------------------------------------------------------- defaults


def test_defaults() -> None:
    c = make()
    assert c.processing_guarantee == "at_least_once"
    assert c.commit_interval_ms == 30_000
    assert (c.poll_ms, c.num_stream_threads, c.num_standby_replicas) == (100, 1, 0)
    assert c.statestore_cache_max_bytes == 10 * 1024 * 1024
    assert c.buffered_records_per_partition == 1000 and c.max_task_idle_ms == 0
    assert c.default_key_serde == Bytes() and c.default_value_serde == Bytes()
    assert c.deserialization_exception_handler == "log_and_fail"
    assert c.processing_exception_handler == "log_and_fail"
    assert c.production_exception_handler == "log_and_fail"
    assert c.replication_factor == -1 and c.topology_optimization == "none"
    assert c.metrics_recording_level == "INFO" and c.task_timeout_ms == 300_000
    assert c.acceptable_recovery_lag == 10_000 and c.probing_rebalance_interval_ms == 600_000
    assert (c.session_timeout_ms, c.heartbeat_interval_ms, c.max_poll_interval_ms) == (45_000, 3_000, 300_000)
    assert c.state_dir.name == "platform-streams"
    assert c.client_config == {} and c.errors_dead_letter_queue_topic_name is None


def test_eos_commit_interval_default_and_explicit() -> None:
    assert make(processing_guarantee="exactly_once_v2").commit_interval_ms == 100
    assert make(processing_guarantee="exactly_once_v2", commit_interval_ms=500).commit_interval_ms == 500
    assert make(commit_interval_ms=0).commit_interval_ms == 0
    assert make(commit_interval_ms=None).commit_interval_ms == 30_000


def test_effective_client_id_generated_once() -> None:
    c = make()
    assert c.client_id is None
    assert c.effective_client_id.startswith("app-")
    assert c.effective_client_id == c.effective_client_id
    assert make(client_id="me").effective_client_id == "me"


def test_frozen_and_equality() -> None:
    c = make()
    with pytest.raises(ValidationError):
        c.poll_ms = 5
    assert c == make()
    assert c != make(poll_ms=5)
    assert hash(c) == hash(make())


def test_serde_by_instance_name_and_java_class() -> None:
    c = make(
        default_key_serde=String(),
        default_value_serde="org.apache.kafka.common.serialization.Serdes$LongSerde",
    )
    assert c.default_key_serde == String()
    assert isinstance(c.default_value_serde, Serde) and c.default_value_serde == Long()
    assert make(default_key_serde=String).default_key_serde == String()


def test_handlers() -> None:
    def handler(*args: Any) -> str:
        return "continue"

    c = make(
        deserialization_exception_handler="org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        processing_exception_handler=handler,
        production_exception_handler="LOG_AND_CONTINUE",
    )
    assert c.deserialization_exception_handler == "log_and_continue"
    assert c.processing_exception_handler is handler
    assert c.production_exception_handler == "log_and_continue"
    fail = make(
        deserialization_exception_handler="org.apache.kafka.streams.errors.LogAndFailExceptionHandler"
    )
    assert fail.deserialization_exception_handler == "log_and_fail"


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("application_id", "my app"),
        ("application_id", ""),
        ("application_id", "."),  # the application's state directory would be state_dir itself
        ("application_id", ".."),  # ... or its parent
        ("application_id", "a" * 300),  # no internal topic name could be made of it
        ("num_stream_threads", "1_0"),  # Python's int() reads 10; Java's parseInt refuses it
        ("commit_interval_ms", "1_000"),
        ("consumer_config", {"sasl.mechanism": "NOPE"}),
        ("client_config", {"sasl.mechanisms": "plain"}),  # librdkafka compares case-sensitively
        ("bootstrap_servers", "localhost"),
        ("bootstrap_servers", "localhost:abc"),
        ("bootstrap_servers", "a:9092,,b:9092"),
        ("bootstrap_servers", "a:9092,b"),
        ("client_id", ""),
        ("application_server", "nohost"),
        ("processing_guarantee", "exactly_once"),
        ("processing_guarantee", "exactly_once_beta"),
        ("processing_guarantee", "at_most_once"),
        ("commit_interval_ms", -1),
        ("poll_ms", 0),
        ("num_stream_threads", 0),
        ("num_standby_replicas", -1),
        ("statestore_cache_max_bytes", -1),
        ("buffered_records_per_partition", 0),
        ("max_task_idle_ms", -2),
        ("task_timeout_ms", -1),
        ("default_key_serde", "no-such-serde"),
        ("default_value_serde", 42),
        ("deserialization_exception_handler", "log_and_ignore"),
        ("processing_exception_handler", 3),
        ("production_exception_handler", "org.example.MyHandler"),
        ("errors_dead_letter_queue_topic_name", "bad topic"),
        ("replication_factor", 0),
        ("replication_factor", -2),
        ("topology_optimization", "some"),
        ("metrics_recording_level", "WARN"),
        ("acceptable_recovery_lag", -1),
        ("probing_rebalance_interval_ms", 999),
        ("session_timeout_ms", 0),
        ("group_instance_id", ""),
        ("client_config", {"bad key": "x"}),
        ("consumer_config", {"": "x"}),
        ("producer_config", {"linger.ms": [1]}),
        ("admin_config", "not-a-dict"),
    ],
)
def test_validation_error_names_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as info:
        make(**{field: value})
    assert field in str(info.value)


def test_exactly_once_message_points_to_v2() -> None:
    with pytest.raises(ValidationError, match="exactly_once_v2"):
        make(processing_guarantee="exactly_once")


@pytest.mark.parametrize(
    ("kw", "names"),
    [
        ({"heartbeat_interval_ms": 45_000}, ("heartbeat_interval_ms", "session_timeout_ms")),
        ({"max_poll_interval_ms": 10_000}, ("max_poll_interval_ms", "session_timeout_ms")),
    ],
)
def test_cross_field_messages_name_fields(kw: dict[str, Any], names: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        make(**kw)
    for name in names:
        assert name in str(info.value)


def test_extra_fields_rejected() -> None:
    with pytest.raises(ValidationError, match="no_such_setting"):
        make(no_such_setting=1)


def test_required_fields() -> None:
    with pytest.raises(ValidationError, match="bootstrap_servers"):
        StreamsConfig(application_id="app")  # type: ignore[call-arg]


def test_accepted_server_forms() -> None:
    c = make(bootstrap_servers=" a:9092, [::1]:9093,SSL://b.example:9094 ", application_server="me:8080")
    assert c.bootstrap_servers == "a:9092,[::1]:9093,SSL://b.example:9094"
    assert c.application_server == "me:8080"


# ----------------------------------------------------------------------------- client dicts


def test_consumer_configs() -> None:
    c = make(client_config={"security.protocol": "SSL"}, consumer_config={"fetch.min.bytes": 10})
    conf = c.consumer_configs()
    assert conf["bootstrap.servers"] == "localhost:9092"
    assert conf["group.id"] == "app"
    assert conf["client.id"] == f"{c.effective_client_id}-StreamThread-1-consumer"
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert conf["auto.offset.reset"] == "earliest"
    assert conf["allow.auto.create.topics"] is False
    assert conf["partition.assignment.strategy"] == "range"
    assert conf["session.timeout.ms"] == 45_000
    assert conf["heartbeat.interval.ms"] == 3_000
    assert conf["max.poll.interval.ms"] == 300_000
    assert conf["isolation.level"] == "read_uncommitted"
    assert conf["fetch.wait.max.ms"] == 100 and conf["fetch.queue.backoff.ms"] == 10
    assert conf["security.protocol"] == "SSL" and conf["fetch.min.bytes"] == 10
    assert "group.instance.id" not in conf
    assert c.consumer_configs(2)["client.id"].endswith("-StreamThread-3-consumer")
    with pytest.raises(ValueError):
        c.consumer_configs(-1)


def test_consumer_configs_eos_and_static_membership() -> None:
    c = make(processing_guarantee="exactly_once_v2", group_instance_id="pod-0")
    assert c.consumer_configs()["isolation.level"] == "read_committed"
    assert c.consumer_configs(0)["group.instance.id"] == "pod-0"
    assert c.consumer_configs(1)["group.instance.id"] == "pod-0-2"


def test_override_order_client_then_per_client() -> None:
    c = make(client_config={"fetch.wait.max.ms": 1, "linger.ms": 1}, consumer_config={"fetch.wait.max.ms": 2})
    assert c.consumer_configs()["fetch.wait.max.ms"] == 2
    assert c.producer_configs()["linger.ms"] == 1


def test_restore_consumer_configs() -> None:
    c = make(processing_guarantee="exactly_once_v2", consumer_config={"group.id": "x"}, group_instance_id="p")
    conf = c.restore_consumer_configs()
    assert "group.id" not in conf and "group.instance.id" not in conf
    assert conf["enable.auto.commit"] is False and conf["auto.offset.reset"] == "earliest"
    assert conf["allow.auto.create.topics"] is False and conf["enable.partition.eof"] is True
    assert conf["isolation.level"] == "read_committed"
    assert conf["fetch.wait.max.ms"] == 10 and conf["fetch.queue.backoff.ms"] == 10
    assert make().restore_consumer_configs()["isolation.level"] == "read_uncommitted"


def test_producer_configs() -> None:
    c = make(producer_config={"compression.type": "lz4"})
    conf = c.producer_configs()
    assert conf["client.id"] == f"{c.effective_client_id}-StreamThread-1-producer"
    assert conf["partitioner"] == "murmur2_random" and conf["linger.ms"] == 100 and conf["acks"] == "all"
    assert "enable.idempotence" not in conf and "transactional.id" not in conf
    assert "allow.auto.create.topics" not in conf
    assert conf["compression.type"] == "lz4"
    with pytest.raises(StreamsConfigError):
        c.producer_configs(transactional_id="app-0_0")
    eos = make(processing_guarantee="exactly_once_v2").producer_configs(1, transactional_id="app-1")
    assert eos["enable.idempotence"] is True and eos["transactional.id"] == "app-1"
    assert eos["client.id"].endswith("-StreamThread-2-producer")


def test_admin_configs() -> None:
    c = make(
        client_id="cid", client_config={"security.protocol": "SSL"}, admin_config={"socket.timeout.ms": 5000}
    )
    assert c.admin_configs() == {
        "bootstrap.servers": "localhost:9092",
        "client.id": "cid-admin",
        "security.protocol": "SSL",
        "socket.timeout.ms": 5000,
    }


# ----------------------------------------------------------------------------- loaders


def test_from_properties_mapping_with_prefix_routing() -> None:
    c = StreamsConfig.from_properties(
        {
            "application.id": "wordcount",
            "bootstrap.servers": "k:9092",
            "num.stream.threads": "4",
            "commit.interval.ms": "250",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "consumer.fetch.min.bytes": "1",
            "main.consumer.max.partition.fetch.bytes": "2",
            "restore.consumer.fetch.max.bytes": "3",
            "producer.compression.type": "zstd",
            "admin.request.timeout.ms": "4",
        }
    )
    assert c.application_id == "wordcount" and c.num_stream_threads == 4 and c.commit_interval_ms == 250
    assert c.client_config == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert c.consumer_config == {
        "fetch.min.bytes": "1",
        "max.partition.fetch.bytes": "2",
        "fetch.max.bytes": "3",
    }
    assert c.producer_config == {"compression.type": "zstd"}
    assert c.admin_config == {"request.timeout.ms": "4"}


def test_from_properties_routes_dsl_store_settings() -> None:
    """Kafka's ``dsl.store.suppliers.class`` (Java's class name) and ``default.dsl.store`` reach
    their fields instead of being dropped; unset, RocksDB (Kafka's default)."""
    from platform_streams.state import BuiltInDslStoreSuppliers

    base = {"application.id": "a", "bootstrap.servers": "k:9092"}
    java = "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers"
    c = StreamsConfig.from_properties({**base, "dsl.store.suppliers.class": java})
    assert c.resolved_dsl_store_suppliers() is BuiltInDslStoreSuppliers.IN_MEMORY
    c = StreamsConfig.from_properties({**base, "default.dsl.store": "in_memory"})
    assert c.resolved_dsl_store_suppliers() is BuiltInDslStoreSuppliers.IN_MEMORY
    assert (
        StreamsConfig.from_properties(base).resolved_dsl_store_suppliers()
        is BuiltInDslStoreSuppliers.ROCKS_DB
    )


def test_from_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "streams.properties"
    path.write_text(
        "# a comment\n"
        "! another comment\n"
        "application.id = orders\n"
        "bootstrap.servers: b1:9092,b2:9092\n"
        "processing.guarantee=exactly_once_v2\n"
        "state.dir=" + str(tmp_path / "state") + "\n"
        "statestore.cache.max.bytes=0\n"
        "default.key.serde=org.apache.kafka.common.serialization.Serdes$StringSerde\n"
        "default.value.serde=org.apache.kafka.common.serialization.Serdes$LongSerde\n"
        "default.deserialization.exception.handler=org.apache.kafka.streams.errors.LogAndContinueExceptionHandler\n"
        "errors.dead.letter.queue.topic.name=orders-dlq\n"
        "replication.factor=3\n"
        "topology.optimization=all\n"
        "application.server=host1:7070\n"
        "metrics.recording.level=DEBUG\n"
        "task.timeout.ms=1000\n"
        "max.task.idle.ms=-1\n"
        "buffered.records.per.partition=50\n"
        "poll.ms=20\n"
        "num.standby.replicas=1\n"
        "session.timeout.ms=10000\n"
        "ssl.ca.location=/etc/ca.pem\n"
        "sasl.oauthbearer.config=principal=admin \\\n"
        "    lifeSeconds=600\n"
    )
    c = StreamsConfig.from_properties(path)
    assert c.application_id == "orders" and c.bootstrap_servers == "b1:9092,b2:9092"
    assert c.processing_guarantee == "exactly_once_v2" and c.commit_interval_ms == 100
    assert c.state_dir == tmp_path / "state" and c.statestore_cache_max_bytes == 0
    assert c.default_key_serde == String() and c.default_value_serde == Long()
    assert c.deserialization_exception_handler == "log_and_continue"
    assert c.errors_dead_letter_queue_topic_name == "orders-dlq"
    assert c.replication_factor == 3 and c.topology_optimization == "all"
    assert c.application_server == "host1:7070" and c.metrics_recording_level == "DEBUG"
    assert (c.task_timeout_ms, c.max_task_idle_ms, c.buffered_records_per_partition) == (1000, -1, 50)
    assert (c.poll_ms, c.num_standby_replicas, c.session_timeout_ms) == (20, 1, 10_000)
    assert c.client_config["ssl.ca.location"] == "/etc/ca.pem"
    assert c.client_config["sasl.oauthbearer.config"] == "principal=admin lifeSeconds=600"
    assert StreamsConfig.from_properties(str(path)) == c


def test_deprecated_cache_key(tmp_path: Path) -> None:
    old = StreamsConfig.from_properties({**BASE, "cache.max.bytes.buffering": "5"})
    assert old.statestore_cache_max_bytes == 5
    for props in (
        {**BASE, "cache.max.bytes.buffering": "5", "statestore.cache.max.bytes": "7"},
        {**BASE, "statestore.cache.max.bytes": "7", "cache.max.bytes.buffering": "5"},
    ):
        assert StreamsConfig.from_properties(props).statestore_cache_max_bytes == 7


def test_unsupported_java_keys_are_dropped_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        c = StreamsConfig.from_properties({**BASE, "default.timestamp.extractor": "x.Y"})
    assert "default.timestamp.extractor" in caplog.text
    assert c.client_config == {}


def test_from_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text(
        "application.id: inventory\n"
        "bootstrap_servers: k:9092\n"
        "num_stream_threads: 2\n"
        "default.value.serde: json\n"
        "client_config:\n"
        "  security.protocol: SSL\n"
        "sasl:\n"
        "  mechanism: PLAIN\n"
        "producer:\n"
        "  compression.type: lz4\n"
        "consumer_config: {fetch.min.bytes: 5}\n"
    )
    c = StreamsConfig.from_properties(path)
    assert c.application_id == "inventory" and c.num_stream_threads == 2
    assert c.default_value_serde.name == "json"
    assert c.client_config == {"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}
    assert c.producer_config == {"compression.type": "lz4"}
    assert c.consumer_config == {"fetch.min.bytes": 5}
    yml = tmp_path / "streams.yml"
    yml.write_text(path.read_text())
    assert StreamsConfig.from_properties(yml) == c


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(StreamsConfigError, match="cannot read"):
        StreamsConfig.from_properties(tmp_path / "missing.properties")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(StreamsConfigError, match="invalid YAML"):
        StreamsConfig.from_properties(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(StreamsConfigError, match="mapping"):
        StreamsConfig.from_properties(listy)
    assert issubclass(StreamsConfigError, ValueError)


def test_from_properties_routes_internal_emit_intervals() -> None:
    """Kafka's dunder-named InternalConfig emit intervals reach their fields (default 0, Kafka's
    TopologyTestDriver value); a bad value's error names the field."""
    windowed, outer = "__emit.interval.ms.kstreams.windowed.aggregation__", (
        "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__"
    )
    c = StreamsConfig.from_properties({**BASE, windowed: "1000", outer: 250})
    assert c.emit_interval_ms_kstreams_windowed_aggregation == 1000
    assert c.emit_interval_ms_kstreams_outer_join_spurious_results_fix == 250
    c = StreamsConfig.from_properties(BASE)
    assert c.emit_interval_ms_kstreams_windowed_aggregation == 0
    assert c.emit_interval_ms_kstreams_outer_join_spurious_results_fix == 0
    with pytest.raises(ValidationError, match="emit_interval_ms_kstreams_windowed_aggregation"):
        StreamsConfig.from_properties({**BASE, windowed: -1})
    with pytest.raises(ValidationError, match="emit_interval_ms_kstreams_outer_join_spurious_results_fix"):
        StreamsConfig.from_properties({**BASE, outer: "soon"})


def test_from_properties_validation_names_field() -> None:
    with pytest.raises(ValidationError, match="num_stream_threads"):
        StreamsConfig.from_properties({**BASE, "num.stream.threads": "zero"})


def test_from_env() -> None:
    env = {
        "PLATFORM_STREAMS_APPLICATION_ID": "envapp",
        "PLATFORM_STREAMS_NUM_STREAM_THREADS": "3",
        "PLATFORM_STREAMS_CLIENT_CONFIG": '{"security.protocol": "SSL"}',
        "OTHER": "ignored",
    }
    c = StreamsConfig.from_env(env, base={"application.id": "base", "bootstrap.servers": "b:1"})
    assert c.application_id == "envapp" and c.bootstrap_servers == "b:1" and c.num_stream_threads == 3
    assert c.client_config == {"security.protocol": "SSL"}
    custom = StreamsConfig.from_env({"X_APPLICATION_ID": "a", "X_BOOTSTRAP_SERVERS": "h:1"}, prefix="X_")
    assert custom.application_id == "a"
    with pytest.raises(StreamsConfigError, match="PLATFORM_STREAMS_CLIENT_CONFIG"):
        StreamsConfig.from_env({**env, "PLATFORM_STREAMS_CLIENT_CONFIG": "not json"}, base=BASE)


def test_load_layers_file_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "app.properties"
    path.write_text("application.id=file\nbootstrap.servers=f:1\npoll.ms=5\nsecurity.protocol=SSL\n")
    env = {"PLATFORM_STREAMS_POLL_MS": "6", "PLATFORM_STREAMS_NUM_STREAM_THREADS": "2"}
    c = StreamsConfig.load(path, env=env, overrides={"num.stream.threads": 9, "ssl.ca.location": "/ca"})
    assert c.application_id == "file" and c.poll_ms == 6 and c.num_stream_threads == 9
    assert c.client_config == {"security.protocol": "SSL", "ssl.ca.location": "/ca"}
    only_env = StreamsConfig.load(
        env={"PLATFORM_STREAMS_APPLICATION_ID": "e", "PLATFORM_STREAMS_BOOTSTRAP_SERVERS": "h:2"}
    )
    assert only_env.application_id == "e"


def test_with_overrides() -> None:
    c = make(poll_ms=7)
    eos = c.with_overrides(processing_guarantee="exactly_once_v2")
    assert eos.poll_ms == 7 and eos.commit_interval_ms == 100  # derived default follows the guarantee
    assert eos.effective_client_id == c.effective_client_id
    assert (
        make(commit_interval_ms=30_000)
        .with_overrides(processing_guarantee="exactly_once_v2")
        .commit_interval_ms
        == 30_000
    )
    assert c.poll_ms == 7 and c.commit_interval_ms == 30_000
    with pytest.raises(ValidationError, match="poll_ms"):
        c.with_overrides(poll_ms=0)
    with pytest.raises(ValidationError, match="nope"):
        c.with_overrides(nope=1)


# ----------------------------------------------------------------------------- redaction


SECRETS = {
    "sasl.password": "hunter2",
    "ssl.key.password": "k-secret-pw",
    "sasl.oauthbearer.client.secret": "oauth-secret",
    "ssl.keystore.password": "keystore-secret",
    "sasl.oauthbearer.config": "principal=tok-secret",
}


def test_redaction() -> None:
    c = make(
        client_config={**SECRETS, "security.protocol": "SASL_SSL"},
        producer_config={"sasl.password": "prod-pw-xyz"},
    )
    for text in (repr(c), str(c), str(c.redacted()), c.model_dump_json()):
        for secret in [*SECRETS.values(), "prod-pw-xyz"]:
            assert secret not in text
        assert "SASL_SSL" in text
    red = c.redacted()
    assert red["client_config"]["sasl.password"] != "hunter2"
    assert red["effective_client_id"] == c.effective_client_id
    assert red["default_key_serde"] == repr(Bytes())
    # The real values are still there for the clients.
    assert c.consumer_configs()["sasl.password"] == "hunter2"
    assert c.model_dump()["client_config"]["sasl.password"] == "hunter2"


def test_redacted_renders_callables() -> None:
    def my_handler(*args: Any) -> None:
        return None

    red = make(processing_exception_handler=my_handler).redacted()
    assert "my_handler" in red["processing_exception_handler"]


def test_properties_syntax_edge_cases(tmp_path: Path) -> None:
    path = tmp_path / "edge.properties"
    path.write_text(
        "   # indented comment\n"
        "\n"
        "application.id app\n"  # whitespace separator
        "bootstrap.servers=h:1\n"
        "ssl.key.location = C\\:\\\\keys\\\\k.pem\n"  # escapes
        "sasl.username=caf\\u00e9\n"
        "client.id  :  me  \n"
    )
    c = StreamsConfig.from_properties(path)
    assert c.application_id == "app" and c.client_id == "me"
    assert c.client_config == {"ssl.key.location": "C:\\keys\\k.pem", "sasl.username": "café"}


def test_state_dir_expands_user() -> None:
    assert make(state_dir="~/streams").state_dir == Path("~/streams").expanduser()
