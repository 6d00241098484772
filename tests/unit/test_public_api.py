"""Pin the public API: the names each public package exports, and nothing else.

A name added to or removed from an ``__all__`` is an API change; this test makes it a
deliberate one (update the pin in the same change). Every pinned name must also resolve,
so a stale ``__all__`` entry fails here rather than on a user's ``from ... import``.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC_API: dict[str, set[str]] = {
    "platform_streams": {
        "KafkaStreams",
        "serde",
        "State",
        "StreamsBuilder",
        "StreamsConfig",
        "StreamsError",
        "StreamsUncaughtExceptionResponse",
        "Topology",
    },
    "platform_streams.dsl": {
        "Branched",
        "BranchedKStream",
        "BufferConfig",
        "CogroupedKStream",
        "Consumed",
        "EmitStrategy",
        "GlobalKTable",
        "Grouped",
        "JoinWindows",
        "Joined",
        "KGroupedStream",
        "KGroupedTable",
        "KStream",
        "KTable",
        "Materialized",
        "Named",
        "Printed",
        "Produced",
        "Repartitioned",
        "SessionWindow",
        "SessionWindowedKStream",
        "SessionWindowedSerde",
        "SessionWindows",
        "SlidingWindows",
        "StreamJoined",
        "StreamsBuilder",
        "Suppressed",
        "TableJoined",
        "TimeWindow",
        "TimeWindowedKStream",
        "TimeWindowedSerde",
        "TimeWindows",
        "UnlimitedWindows",
        "Window",
        "Windowed",
    },
    "platform_streams.serde": {
        "Avro",
        "JsonSchema",
        "Protobuf",
        "RegistrySettings",
        "Boolean",
        "Bytes",
        "Double",
        "Float",
        "Integer",
        "Json",
        "Long",
        "Pydantic",
        "Serde",
        "serde_from_name",
        "Short",
        "String",
        "UUID",
        "Void",
    },
    "platform_streams.processor": {
        "AsyncOptions",
        "AsyncRecordContext",
        "Cancellable",
        "FixedKeyProcessor",
        "FixedKeyProcessorContext",
        "FixedKeyProcessorSupplier",
        "FixedKeyRecord",
        "Headers",
        "Processor",
        "ProcessorContext",
        "ProcessorSupplier",
        "ProcessorWrapper",
        "PunctuationType",
        "Punctuator",
        "Record",
        "RecordMetadata",
        "StateStore",
        "TaskId",
    },
    "platform_streams.query": {
        "FailureReason",
        "HostInfo",
        "KeyQuery",
        "KeyQueryMetadata",
        "LagInfo",
        "MultiVersionedKeyQuery",
        "Position",
        "PositionBound",
        "Query",
        "QueryResult",
        "RangeQuery",
        "StateQueryRequest",
        "StateQueryResult",
        "StreamsMetadata",
        "VersionedKeyQuery",
        "WindowKeyQuery",
        "WindowRangeQuery",
    },
    "platform_streams.testing": {
        "TestInputTopic",
        "TestOutputTopic",
        "TestRecord",
        "TopologyTestDriver",
    },
    "platform_streams.state": {
        "BuiltInDslStoreSuppliers",
        "DslStoreSuppliers",
        "CachedStateStore",
        "changelog_topic_name",
        "ChangelogPartition",
        "ChangelogReader",
        "CheckpointFormatError",
        "FlushListener",
        "FROM_BEGINNING",
        "KeyValueBytesStoreSupplier",
        "KeyValueStore",
        "KeyValueStoreBuilder",
        "OffsetCheckpoint",
        "ProcessorStateManager",
        "RecordCache",
        "RecordFilter",
        "RestoreCallback",
        "SessionBytesStoreSupplier",
        "SessionStore",
        "SessionStoreBuilder",
        "SessionWindow",
        "StateRestoreListener",
        "StateStore",
        "StateStoreContext",
        "StoreBuilder",
        "VersionedBytesStoreSupplier",
        "VersionedKeyValueStoreBuilder",
        "VersionedRecord",
        "Stores",
        "TimeWindow",
        "Window",
        "WindowBytesStoreSupplier",
        "Windowed",
        "WindowStore",
        "WindowStoreBuilder",
    },
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_all_is_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"duplicates in {module_name}.__all__"
    assert set(exported) == PUBLIC_API[module_name], (
        f"{module_name}.__all__ changed: added {sorted(set(exported) - PUBLIC_API[module_name])}, "
        f"removed {sorted(PUBLIC_API[module_name] - set(exported))}"
    )


@pytest.mark.parametrize("module_name", sorted(PUBLIC_API))
def test_every_public_name_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert not missing, f"{module_name}.__all__ names what it does not define (or binds to None): {missing}"


def test_public_classes_and_functions_say_why() -> None:
    """Every exported class and function of our own has a docstring."""
    undocumented = []
    for module_name, names in PUBLIC_API.items():
        module = importlib.import_module(module_name)
        for name in names:
            obj = getattr(module, name)
            own = getattr(obj, "__module__", "").startswith("platform_streams")
            if own and (inspect.isclass(obj) or inspect.isfunction(obj)) and not inspect.getdoc(obj):
                undocumented.append(f"{module_name}.{name}")
    assert not undocumented, f"public names without a docstring: {undocumented}"


def test_top_level_reexports_are_the_subpackage_objects() -> None:
    """``platform_streams.X`` is the same object as in its home subpackage (no shadow copies)."""
    import platform_streams
    from platform_streams import dsl, kafka_streams, runtime, topology

    assert platform_streams.StreamsBuilder is dsl.StreamsBuilder
    assert platform_streams.KafkaStreams is kafka_streams.KafkaStreams
    # the client composes the runtime with its add-ons (runtime/api.py)
    assert issubclass(platform_streams.KafkaStreams, runtime.StreamsRuntime)
    assert platform_streams.Topology is topology.Topology
