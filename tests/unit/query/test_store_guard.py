"""The worker/query handoff of StoreGuard, with a real thread standing in for the worker."""

from __future__ import annotations

import threading
import time

import pytest

from platform_streams.errors import StreamsTimeoutError
from platform_streams.runtime.store_guard import StoreGuard


class FakeWorker(threading.Thread):
    """Holds the guard like a worker: busy loop with yield points, or parked in a 'poll'."""

    def __init__(self, guard: StoreGuard, *, yields: bool, parks: bool) -> None:
        super().__init__(daemon=True)
        self.guard = guard
        self.yields = yields
        self.parks = parks
        self.stop = threading.Event()
        self.started_holding = threading.Event()
        self.inside_worker = 0
        self.overlaps = 0

    def run(self) -> None:
        self.guard.acquire_for_worker()
        self.started_holding.set()
        try:
            while not self.stop.is_set():
                if self.yields:
                    self.guard.yield_point()
                if self.parks:
                    with self.guard.released():
                        time.sleep(0.01)
                self.inside_worker += 1  # "mutating stores" while holding the guard
                time.sleep(0.001)
        finally:
            self.guard.release_for_worker()


def _run(guard: StoreGuard, *, yields: bool, parks: bool) -> FakeWorker:
    worker = FakeWorker(guard, yields=yields, parks=parks)
    worker.start()
    assert worker.started_holding.wait(5)
    return worker


@pytest.mark.parametrize(("yields", "parks"), [(True, False), (False, True)])
def test_queries_get_in_at_yield_points_and_while_parked(yields: bool, parks: bool) -> None:
    guard = StoreGuard()
    worker = _run(guard, yields=yields, parks=parks)
    try:
        for _ in range(20):
            with guard.hold(timeout_s=2):
                before = worker.inside_worker
                time.sleep(0.005)
                assert worker.inside_worker == before, "the worker ran while the query held the guard"
    finally:
        worker.stop.set()
        worker.join(5)


def test_a_worker_that_never_yields_times_the_query_out() -> None:
    guard = StoreGuard()
    worker = _run(guard, yields=False, parks=False)
    try:
        with pytest.raises(StreamsTimeoutError), guard.hold(timeout_s=0.1):
            pass
        assert guard.waiting == 0
    finally:
        worker.stop.set()
        worker.join(5)


def test_wrapped_callbacks_lock_only_when_released_and_the_holder_may_query() -> None:
    guard = StoreGuard()
    guard.acquire_for_worker()
    calls: list[str] = []
    callback = guard.wrap(lambda: calls.append("held"))
    callback()  # holder calls it inside consume(): no self-deadlock
    with guard.released():
        callback()  # inside poll: takes the guard for the callback
        with guard.hold(timeout_s=1):  # a query may take it meanwhile too
            calls.append("query")
    with guard.hold(timeout_s=0.1):  # the holder querying itself: no lock taken
        calls.append("self-query")
    guard.release_for_worker()
    assert calls == ["held", "held", "query", "self-query"]
