"""A stand-in worker for unit tests of the runtime's add-ons (metrics, queries).

It has the attributes a test sets plus the two hooks of
:class:`~platform_streams.runtime.api.WorkerView` an add-on calls when it attaches, chained
as the real worker chains them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from platform_streams.runtime.api import WorkerState
from platform_streams.runtime.observer import WorkerObserver, chain_observer, chain_restore_listener
from platform_streams.state.restore import StateRestoreListener


class FakeWorker(SimpleNamespace):
    def __init__(self, **attrs: Any) -> None:
        attrs.setdefault("observer", WorkerObserver())
        attrs.setdefault("plan", SimpleNamespace(subtopologies=[]))  # no topics: no topic-level series
        attrs.setdefault("input_queues", None)
        attrs.setdefault("state_lifecycle", SimpleNamespace(listener=None))
        super().__init__(**attrs)

    @property
    def processing(self) -> bool:
        """As the worker's: RUNNING, or tasks kept through a cooperative rebalance (a test sets
        ``kept_through_rebalance``)."""
        return self.state is WorkerState.RUNNING or bool(getattr(self, "kept_through_rebalance", False))

    def add_observer(self, observer: WorkerObserver) -> None:
        self.observer = chain_observer(self.observer, observer)

    def add_restore_listener(self, listener: StateRestoreListener) -> None:
        self.state_lifecycle.listener = chain_restore_listener(self.state_lifecycle.listener, listener)
