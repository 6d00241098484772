"""The exception tree: hierarchy, attributes, messages and pickling."""

from __future__ import annotations

import pickle

import pytest

from platform_streams import errors as e


@pytest.mark.parametrize(
    ("child", "parent"),
    [
        (e.StreamsConfigError, e.StreamsError),
        (e.StreamsConfigError, ValueError),
        (e.TopologyError, e.StreamsError),
        (e.MissingSourceTopicError, e.TopologyError),
        (e.CoPartitioningError, e.TopologyError),
        (e.SerializationError, e.StreamsError),
        (e.DeserializationError, e.SerializationError),
        (e.ProcessorError, e.StreamsError),
        (e.StreamsStateError, e.StreamsError),
        (e.IllegalStateError, e.StreamsStateError),
        (e.InvalidStateStoreError, e.StreamsError),
        (e.InvalidStateStorePartitionError, e.InvalidStateStoreError),
        (e.TaskMigratedError, e.StreamsError),
        (e.ProducerFencedError, e.TaskMigratedError),
        (e.TaskCorruptedError, e.StreamsError),
        (e.BrokerError, e.StreamsError),
        (e.UnsupportedBrokerFeatureError, e.BrokerError),
        (e.StreamsTimeoutError, e.StreamsError),
        (e.StreamsTimeoutError, TimeoutError),
    ],
)
def test_hierarchy(child: type[BaseException], parent: type[BaseException]) -> None:
    assert issubclass(child, parent)


def test_every_public_name_is_documented_and_in_the_tree_drawing() -> None:
    doc = e.__doc__ or ""
    for name in e.__all__:
        cls = getattr(e, name)
        assert issubclass(cls, e.StreamsError)
        assert cls.__doc__, name
        assert name in doc, name


def test_missing_source_topic() -> None:
    err = e.MissingSourceTopicError(["b", "a"])
    assert err.topics == ["a", "b"]
    assert "a, b" in str(err)


def test_co_partitioning_names_each_topic_and_count() -> None:
    err = e.CoPartitioningError({"left": 3, "right": 5})
    assert err.partition_counts == {"left": 3, "right": 5}
    assert "left=3" in str(err) and "right=5" in str(err)


def test_serialization_coordinates() -> None:
    err = e.DeserializationError("bad json", topic="t", partition=2, offset=42)
    assert (err.topic, err.partition, err.offset) == ("t", 2, 42)
    assert "t-2@42" in str(err)
    assert str(e.SerializationError("boom")) == "boom"


def test_processor_error_keeps_context_and_cause() -> None:
    original = ZeroDivisionError("x")
    with pytest.raises(e.ProcessorError) as info:
        try:
            raise original
        except ZeroDivisionError as exc:
            raise e.ProcessorError(
                "user code failed", node="KSTREAM-MAP-1", task_id="0_1", topic="in", partition=1, offset=7
            ) from exc
    err = info.value
    assert err.__cause__ is original
    assert (err.node, err.task_id, err.topic, err.partition, err.offset) == (
        "KSTREAM-MAP-1",
        "0_1",
        "in",
        1,
        7,
    )
    assert "node=KSTREAM-MAP-1" in str(err) and "task=0_1" in str(err) and "in-1@7" in str(err)


def test_state_store_errors() -> None:
    err = e.InvalidStateStorePartitionError(store="counts", partition=3)
    assert err.store == "counts" and err.partition == 3
    assert "counts" in str(err) and "3" in str(err)


def test_task_errors() -> None:
    assert e.TaskCorruptedError(["0_1", "1_0"]).task_ids == ["0_1", "1_0"]
    assert e.ProducerFencedError(task_id="0_0").task_id == "0_0"


def test_broker_errors() -> None:
    err = e.BrokerError("leader not available", code="LEADER_NOT_AVAILABLE", retriable=True)
    assert err.code == "LEADER_NOT_AVAILABLE" and err.retriable
    feat = e.UnsupportedBrokerFeatureError("DeleteRecords")
    assert feat.feature == "DeleteRecords" and not feat.retriable
    assert "DeleteRecords" in str(feat)


@pytest.mark.parametrize(
    "err",
    [
        e.MissingSourceTopicError(["a"]),
        e.CoPartitioningError({"a": 1, "b": 2}),
        e.DeserializationError("x", topic="t", partition=0, offset=1),
        e.ProcessorError("x", node="n", task_id="0_0"),
        e.InvalidStateStorePartitionError(store="s", partition=1),
        e.TaskCorruptedError(["0_0"]),
        e.ProducerFencedError(task_id="0_0"),
        e.UnsupportedBrokerFeatureError("DeleteRecords", code="UNSUPPORTED_VERSION"),
        e.StreamsTimeoutError("close timed out"),
    ],
)
def test_errors_survive_pickling(err: e.StreamsError) -> None:
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is type(err)
    assert str(copy) == str(err)
    assert copy.__dict__ == err.__dict__
