"""Client lifecycle states and the transitions KafkaStreams allows (no broker needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams import (
    KafkaStreams,
    State,
    StreamsBuilder,
    StreamsConfig,
    StreamsUncaughtExceptionResponse,
)
from platform_streams.errors import IllegalStateError, StreamsStateError, StreamsTimeoutError

LEGAL = {
    (State.CREATED, State.REBALANCING),
    (State.CREATED, State.PENDING_SHUTDOWN),
    (State.CREATED, State.PENDING_ERROR),
    (State.REBALANCING, State.RUNNING),
    (State.REBALANCING, State.REBALANCING),
    (State.REBALANCING, State.PENDING_SHUTDOWN),
    (State.REBALANCING, State.PENDING_ERROR),
    (State.RUNNING, State.REBALANCING),
    (State.RUNNING, State.PENDING_SHUTDOWN),
    (State.RUNNING, State.PENDING_ERROR),
    (State.PENDING_SHUTDOWN, State.NOT_RUNNING),
    (State.PENDING_ERROR, State.ERROR),
}


@pytest.mark.parametrize("old", list(State))
@pytest.mark.parametrize("new", list(State))
def test_transition_table_matches_kafka_streams(old: State, new: State) -> None:
    assert old.can_transition_to(new) is ((old, new) in LEGAL)


def test_terminal_states_and_running_predicate() -> None:
    assert [s for s in State if s.is_running_or_rebalancing()] == [State.REBALANCING, State.RUNNING]
    assert not any(State.NOT_RUNNING.can_transition_to(s) or State.ERROR.can_transition_to(s) for s in State)


def test_exception_responses_are_kafka_streams_names() -> None:
    assert {r.value for r in StreamsUncaughtExceptionResponse} == {
        "REPLACE_WORKER",
        "SHUTDOWN_CLIENT",
        "SHUTDOWN_APPLICATION",
    }


def _client(tmp_path: Path) -> KafkaStreams:
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    config = StreamsConfig(application_id="life", bootstrap_servers="127.0.0.1:1", state_dir=tmp_path)
    return KafkaStreams(builder, config)


def test_close_before_start_goes_to_not_running_and_notifies(tmp_path: Path) -> None:
    client = _client(tmp_path)
    seen: list[tuple[State, State]] = []
    client.set_state_listener(lambda new, old: seen.append((new, old)))
    assert client.state() is State.CREATED
    assert client.close(timeout_s=1)
    assert client.state() is State.NOT_RUNNING
    assert seen == [(State.PENDING_SHUTDOWN, State.CREATED), (State.NOT_RUNNING, State.PENDING_SHUTDOWN)]
    assert client.close(timeout_s=1)  # idempotent
    with pytest.raises(IllegalStateError, match="start"):
        client.start()


def test_listeners_and_handlers_only_before_start(tmp_path: Path) -> None:
    client = _client(tmp_path)
    client.close()
    with pytest.raises(IllegalStateError, match="set_state_listener"):
        client.set_state_listener(lambda new, old: None)
    with pytest.raises(IllegalStateError, match="set_uncaught_exception_handler"):
        client.set_uncaught_exception_handler(lambda exc: StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT)


def test_a_failing_listener_does_not_break_transitions(tmp_path: Path) -> None:
    client = _client(tmp_path)

    def bad(new: State, old: State) -> None:
        raise RuntimeError("listener bug")

    client.set_state_listener(bad)
    client.close()
    assert client.state() is State.NOT_RUNNING


def test_wait_for_state_fails_fast_on_terminal_states_and_times_out(tmp_path: Path) -> None:
    client = _client(tmp_path)
    with pytest.raises(StreamsTimeoutError):
        client.wait_for_state(State.RUNNING, timeout_s=0.05)
    assert client.wait_for_state(State.CREATED, timeout_s=0.05) is State.CREATED
    client.close()
    with pytest.raises(StreamsStateError, match="NOT_RUNNING"):
        client.wait_for_state(State.RUNNING, timeout_s=5)


def test_cleanup_removes_local_state_only_when_not_running(tmp_path: Path) -> None:
    client = _client(tmp_path)
    app_dir = tmp_path / "life"
    (app_dir / "0_0").mkdir(parents=True)
    client.cleanup()  # CREATED is allowed
    assert not app_dir.exists()
    (app_dir / "0_0").mkdir(parents=True)
    client.close()
    client.cleanup()
    assert not app_dir.exists()


def test_client_accepts_a_builder_and_a_mapping_config(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    client = KafkaStreams(builder, {"application_id": "m", "bootstrap_servers": "h:1", "state_dir": tmp_path})
    assert client.config.application_id == "m"
    assert client.plan.external_source_topics() == ["in"]
    assert client.metadata_for_local_threads() == []
    with client:
        pass
    assert client.state() is State.NOT_RUNNING
