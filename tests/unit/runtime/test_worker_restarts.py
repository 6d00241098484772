"""The supervisor's restart policy on fake processes (pure logic: no broker, no real children).

What a real worker death does end to end is tested in tests/integration/test_cli_workers.py.
"""

from __future__ import annotations

import threading

import pytest

from platform_streams.runtime.workers.worker_restarts import RestartPolicy, supervise


class _Fake:
    """A worker process whose exit status the test decides (``poll`` like Popen's)."""

    pids = iter(range(1000, 2000))

    def __init__(self, index: int, exits_with: int | None) -> None:
        self.index = index
        self.pid = next(self.pids)
        self.code = exits_with
        self.terminated = False

    def poll(self) -> int | None:
        return self.code

    def terminate(self) -> None:
        self.terminated = True
        if self.code is None:
            self.code = 0

    def kill(self) -> None:
        self.code = -9


def _run(policy: RestartPolicy, plan: dict[int, list[int | None]]) -> tuple[int, str | None, list[_Fake]]:
    """Supervise two workers; worker i's successive incarnations exit as ``plan[i]`` says
    (None: keeps running); the stop comes once every planned incarnation has started."""
    started: list[_Fake] = []
    stop = threading.Event()

    def start(index: int) -> _Fake:
        runs = plan[index]
        code = runs.pop(0) if runs else None
        started.append(_Fake(index, code))
        if all(not r for r in plan.values()) and code is None:
            threading.Timer(0.5, stop.set).start()  # the last planned incarnation runs: stop
        return started[-1]

    timeout = threading.Timer(30, stop.set)  # a bug must fail the test, not hang it
    timeout.start()
    try:
        result = supervise(start, 2, stop, application_id="app", policy=policy, close_timeout_s=5)
    finally:
        timeout.cancel()
    return result.exit_status, result.failure, started


def test_a_failed_worker_is_restarted_and_the_healthy_one_keeps_running() -> None:
    code, failure, started = _run(RestartPolicy(backoff_s=0.01), {0: [None], 1: [-9, 1, None]})
    assert (code, failure) == (0, None)
    assert [p.index for p in started] == [0, 1, 1, 1]
    healthy = started[0]
    assert healthy.terminated and healthy.code == 0  # stopped only by the final stop


def test_one_failure_more_than_the_limit_stops_all_and_says_why() -> None:
    code, failure, started = _run(RestartPolicy(max_restarts=2, backoff_s=0.01), {0: [None], 1: [1, 1, 1]})
    assert code == 1
    assert failure is not None and "worker 1" in failure and "failure 3" in failure and "limit 2" in failure
    assert [p.index for p in started] == [0, 1, 1, 1] and started[0].terminated


def test_an_invalid_configuration_is_never_retried() -> None:
    code, failure, started = _run(RestartPolicy(backoff_s=0.01), {0: [None], 1: [2]})
    assert code == 1 and failure is not None and "invalid configuration" in failure
    assert len(started) == 2


def test_zero_restarts_is_the_old_behaviour() -> None:
    code, failure, started = _run(RestartPolicy(max_restarts=0), {0: [None], 1: [1]})
    assert code == 1 and failure is not None and len(started) == 2


def test_backoff_doubles_per_recent_failure_up_to_the_cap() -> None:
    policy = RestartPolicy(backoff_s=1.0, max_backoff_s=5.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    with pytest.raises(ValueError, match="restart policy"):
        RestartPolicy(max_restarts=-1)
