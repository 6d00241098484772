"""StopRequest: a stop signal that arrives while the main thread holds the lock inside
``threading.Event.wait`` must not deadlock the process (platform_streams/stop_request.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from platform_streams.stop_request import StopRequest

# The moment that hangs: the signal handler runs in the main thread while that thread is
# inside Event.wait's ``with self._cond`` (a plain Lock). Holding the lock and raising the
# signal there makes the moment certain instead of a race.
_OLD_WAY = textwrap.dedent(
    """
    import signal, threading
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    with stop._cond:
        signal.raise_signal(signal.SIGTERM)
    print("stopped", flush=True)
    """
)


def test_a_handler_that_sets_an_event_hangs_when_the_signal_lands_inside_event_wait() -> None:
    """Why StopRequest exists: the plain pattern deadlocks at that moment (CPython's Event)."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", _OLD_WAY], capture_output=True, timeout=3)


def test_a_stop_signal_at_that_moment_is_recorded_and_seen_by_wait() -> None:
    stop = StopRequest()
    with stop.on_signals():
        with stop._event._cond:  # where Event.wait holds the lock
            signal.raise_signal(signal.SIGTERM)
        assert stop.wait(1.0) and stop.is_set()
        assert stop.signum == signal.SIGTERM


def test_handlers_are_restored_after_the_block() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with StopRequest().on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_wait_times_out_and_wakes_on_a_set_from_another_thread() -> None:
    stop = StopRequest()
    started = time.monotonic()
    assert stop.wait(0.25) is False
    assert 0.2 <= time.monotonic() - started < 2.0
    threading.Timer(0.1, stop.set).start()
    assert stop.wait(5.0) is True and stop.signum is None


def test_an_existing_event_is_the_one_set() -> None:
    event = threading.Event()
    stop = StopRequest(event)
    stop.set()
    assert event.is_set() and stop.is_set()
