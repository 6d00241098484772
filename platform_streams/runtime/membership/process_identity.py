"""Who a client is across restarts, and the lock that keeps its state directory its own.

Exactly-once fencing and recovery need an identity that survives a restart of the same
member: when a member comes back, its producer's ``init_transactions`` with the *same*
transactional.id fences the previous incarnation (a zombie that is still running) and
settles what it left open. The identity is, in order of preference:

1. ``group_instance_id`` (static membership; the Helm chart sets it from the pod name), so
   a pod that loses its volume keeps its identity;
2. otherwise a random id created once and kept in ``<state_dir>/<application_id>/.process-id``
   (Kafka Streams keeps its process id in the state directory the same way).

A client without either persistent piece (no instance id and a throw-away state directory)
gets a new identity on every start; it still works, but on a broker that leaves a crashed
producer's transaction open nobody settles that transaction.

The state directory is locked (``flock`` on ``.lock``) for as long as the client runs: two
processes sharing one directory would corrupt each other's RocksDB files and would share
one transactional.id (fencing each other forever). ``run --workers N`` gives every worker
process its own directory for that reason.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from pathlib import Path
from typing import IO

from platform_streams.errors import IllegalStateError
from platform_streams.state.private_files import (
    ensure_app_dir,
    open_private,
    unusable_state_dir,
    write_private,
)

__all__ = ["ProcessIdentity"]

_ID_FILE = ".process-id"
_LOCK_FILE = ".lock"


class ProcessIdentity:
    """The stable id of one client and the lock on its state directory."""

    def __init__(self, application_id: str, state_root: Path, group_instance_id: str | None) -> None:
        self.application_id = application_id
        self.state_root = state_root
        self._group_instance_id = group_instance_id
        self._lock: IO[str] | None = None
        self.process_id = group_instance_id or self._stored_id()

    def _stored_id(self) -> str:
        ensure_app_dir(self.state_root)  # first: an unusable state_dir is a config error
        path = self.state_root / _ID_FILE
        # An id file we cannot read or replace (a directory, no permission, not text) is an
        # unusable state_dir: one line naming the setting and the file, not a traceback.
        try:
            text = path.read_text(encoding="utf-8").strip()
            if text:
                return text
        except FileNotFoundError:
            pass
        except UnicodeDecodeError:
            raise unusable_state_dir(path, OSError(0, "not a text file")) from None
        except OSError as exc:
            raise unusable_state_dir(path, exc) from exc
        new = uuid.uuid4().hex[:16]
        try:
            write_private(path, f"{new}\n".encode())
        except OSError as exc:
            raise unusable_state_dir(path, exc) from exc
        return new

    def transactional_id(self, worker_index: int) -> str:
        """``<application_id>-<process id>-<worker number>``: one per worker, stable across restarts."""
        return f"{self.application_id}-{self.process_id}-{worker_index + 1}"

    def lock(self) -> None:
        """Take the state directory; raises IllegalStateError if another client holds it."""
        if self._lock is not None:
            return
        ensure_app_dir(self.state_root)
        try:
            fd = open_private(self.state_root / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        except OSError as exc:
            raise unusable_state_dir(self.state_root / _LOCK_FILE, exc) from exc
        handle = os.fdopen(fd, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise IllegalStateError(
                f"state directory {self.state_root} is in use by another client of "
                f"{self.application_id!r}; every instance (and --workers process) needs its own state_dir"
            ) from None
        self._lock = handle

    def unlock(self) -> None:
        handle, self._lock = self._lock, None
        if handle is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            finally:
                handle.close()
