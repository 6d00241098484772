"""What every wrapper layer shares: delegation of the lifecycle to the store it wraps.

A stack is ``metered -> caching -> change-logging -> bytes store``; each layer holds the
next in ``wrapped`` (Kafka Streams' ``WrappedStateStore``), so :func:`innermost` can reach
the bytes store (the state manager asks it whether it started empty).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from platform_streams.state.api import StateStore

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["WrappedStore", "changelog_topic_name", "innermost", "record_timestamp"]


def changelog_topic_name(application_id: str, store_name: str) -> str:
    """Kafka Streams' changelog topic name: ``<application id>-<store name>-changelog``."""
    return f"{application_id}-{store_name}-changelog"


def record_timestamp(context: StateStoreContext) -> int:
    """The timestamp given to a change: the task's stream time (wall clock before any record).

    The context does not expose the current record's own timestamp; stream time is never
    earlier than it, so changelog retention (``compact,delete`` topics) errs on keeping.
    """
    ts = context.current_stream_time_ms()
    return ts if ts >= 0 else context.current_system_time_ms()


def innermost(store: Any) -> Any:
    """Follow ``wrapped`` down to the bytes store."""
    while isinstance(store, WrappedStore):
        store = store.wrapped
    return store


class WrappedStore(StateStore):
    """Delegates identity and lifecycle to ``wrapped``; subclasses add one concern each."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    @property
    def name(self) -> str:
        name: str = self.wrapped.name
        return name

    @property
    def persistent(self) -> bool:
        return bool(self.wrapped.persistent)

    @property
    def is_open(self) -> bool:
        return bool(self.wrapped.is_open)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.wrapped.init(context, root)

    def flush(self) -> None:
        self.wrapped.flush()

    def close(self) -> None:
        self.wrapped.close()

    def wipe(self) -> None:
        self.wrapped.wipe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"
