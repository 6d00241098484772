"""A stop that SIGTERM/SIGINT may ask for without taking a lock in the signal handler.

Python runs a signal handler in the main thread between two bytecodes -- possibly while that
thread is inside ``threading.Event.wait()`` holding the event's lock (a plain, non-reentrant
``Lock``). A handler calling ``event.set()`` then waits for that same lock, held by the frame it
interrupted: the process hangs on its SIGTERM until it is killed, with no final commit, no
leave-group and no checkpoint. So the handler
here only stores the signal's number (an attribute store takes no lock), and
:meth:`StopRequest.wait` and :meth:`StopRequest.is_set` look at it beside the event that
other threads set.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["STOP_SIGNALS", "StopRequest"]

#: what stops a process of this package: a service manager's SIGTERM, Ctrl-C's SIGINT
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: how soon a wait notices a signal: the handler cannot wake it (that would take the lock)
_SIGNAL_POLL_S = 0.1


class StopRequest:
    """Like :class:`threading.Event` (``set``, ``is_set``, ``wait``) for a stop; while
    :meth:`on_signals` is active, a stop signal sets it too (``signum`` says which)."""

    def __init__(self, event: threading.Event | None = None) -> None:
        self._event = event if event is not None else threading.Event()
        #: the stop signal received, None before one came
        self.signum: int | None = None

    def set(self) -> None:
        """Ask for the stop (from any thread, never from a signal handler)."""
        self._event.set()

    def is_set(self) -> bool:
        return self.signum is not None or self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the stop was asked within ``timeout`` seconds (None: wait until it is)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            step = _SIGNAL_POLL_S if deadline is None else min(_SIGNAL_POLL_S, deadline - time.monotonic())
            if step <= 0:
                return False
            self._event.wait(step)
        return True

    @contextmanager
    def on_signals(self, *, exit_on_second: bool = False) -> Iterator[StopRequest]:
        """While active, SIGTERM/SIGINT ask for the stop; with ``exit_on_second`` a second
        one exits the process at once (main thread only, as ``signal.signal``)."""

        def handle(signum: int, frame: FrameType | None) -> None:
            if exit_on_second and self.signum is not None:
                os.write(2, f"platform-streams: second {signal.Signals(signum).name}, exiting now\n".encode())
                os._exit(128 + signum)
            self.signum = signum

        previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
