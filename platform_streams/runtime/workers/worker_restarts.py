"""Supervising worker processes: restart a failed one with backoff, give up on repeated failure.

Kafka Streams replaces a dead stream thread when the uncaught exception handler answers
REPLACE_THREAD, and the other threads keep their tasks. ``run --workers N`` (and
:func:`~platform_streams.process_supervisor.run_workers`) do the same one level up: a
worker process that dies -- SIGKILL, the OOM killer, a state directory it cannot use, a
poison record under ``log_and_fail`` -- is started again with the same index (same state
directory, client id and transactional.id), and the healthy workers keep running.

The policy is bounded (:class:`RestartPolicy`): each worker may be restarted
``max_restarts`` times within ``window_s``; the delay before a restart starts at
``backoff_s`` and doubles with every recent failure of that worker (up to
``max_backoff_s``). A worker that fails once more within the window makes the supervisor
stop every worker and report why (exit status 1). A worker that exits with status 2 (its
configuration is invalid) is never restarted: another try cannot help. ``max_restarts=0``
is the old behaviour: the first failure stops everything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["RestartPolicy", "StopFlag", "WorkerProcess", "stop_processes", "supervise"]

log = logging.getLogger(__name__)

#: the exit status of an invalid configuration (README: exit codes of ``platform-streams run``)
_INVALID_CONFIG = 2
_KILL_GRACE_S = 10.0


@dataclass(frozen=True)
class RestartPolicy:
    """How often a failed worker process is restarted (see the module docstring)."""

    max_restarts: int = 3
    window_s: float = 300.0
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.window_s <= 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(f"invalid restart policy {self}: counts and times must not be negative")

    def delay(self, recent_failures: int) -> float:
        """The wait before restarting a worker that failed ``recent_failures`` times in the window."""
        return min(self.max_backoff_s, self.backoff_s * 2 ** max(0, recent_failures - 1))


class StopFlag(Protocol):
    """What the supervisor needs of its stop (a ``threading.Event`` has it, and so has the
    signal-safe ``platform_streams.stop_request.StopRequest`` the CLI passes)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class WorkerProcess(Protocol):
    """What the supervisor needs of a worker process (a ``subprocess.Popen`` has it all)."""

    @property
    def pid(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


def stop_processes(
    procs: list[WorkerProcess], timeout_s: float, *, poll_s: float = 0.1, grace_s: float = _KILL_GRACE_S
) -> list[WorkerProcess]:
    """Stop ``procs``: SIGTERM (a clean close with a final commit), up to ``timeout_s`` for
    them to exit, then SIGKILL for the rest, and up to ``grace_s`` for the kills to land.

    Every way of running workers stops them with this (``run --workers N``,
    ``run_workers`` and the Dagster launcher's detached workers). Returns the processes
    that had to be killed (empty after a clean stop).
    """
    alive = [p for p in procs if p.poll() is None]
    for proc in alive:
        proc.terminate()
    deadline = time.monotonic() + timeout_s
    while alive and time.monotonic() < deadline:
        time.sleep(poll_s)
        alive = [p for p in alive if p.poll() is None]
    for proc in alive:
        log.error("worker pid %s did not stop within %.0fs: killing it", proc.pid, timeout_s)
        proc.kill()
    deadline = time.monotonic() + grace_s
    while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
        time.sleep(poll_s)
    return alive


@dataclass
class SupervisionResult:
    """How supervision ended: ``failure`` says why when the workers did not stop cleanly."""

    failure: str | None = None

    @property
    def exit_status(self) -> int:
        return 0 if self.failure is None else 1


class _Supervisor:
    def __init__(
        self,
        start: Callable[[int], WorkerProcess],
        workers: int,
        stop: StopFlag,
        policy: RestartPolicy,
        close_timeout_s: float,
        on_stop: Callable[[], None] | None,
        application_id: str,
    ) -> None:
        self._start = start
        self._stop = stop
        self._policy = policy
        self._close_timeout_s = close_timeout_s
        self._on_stop = on_stop
        self.procs: list[WorkerProcess | None] = [start(index) for index in range(workers)]
        log.info(
            "supervising %d workers of %r: pids %s", workers, application_id, [p.pid for p in self.procs if p]
        )
        self._failures: list[list[float]] = [[] for _ in range(workers)]
        self._restart_at: dict[int, float] = {}
        self.result = SupervisionResult()

    def run(self) -> SupervisionResult:
        while not self._stop.is_set():
            now = time.monotonic()
            for index, proc in enumerate(self.procs):
                code = proc.poll() if proc is not None else None
                if proc is not None and code is not None:
                    self.procs[index] = None
                    self._exited(index, proc, code, now)
            if self._stop.is_set():
                break
            self._restart_due(now)
            if not self._restart_at and all(p is None for p in self.procs):
                return self.result  # every worker stopped on its own
            self._stop.wait(0.2)
        if self._on_stop is not None:
            self._on_stop()
        self._restart_at.clear()
        running = [p for p in self.procs if p is not None]
        if stop_processes(running, self._close_timeout_s + _KILL_GRACE_S):
            self.result.failure = self.result.failure or "a worker did not stop in time"
        return self.result

    def _exited(self, index: int, proc: WorkerProcess, code: int, now: float) -> None:
        if code == 0 or self._stop.is_set():
            if code != 0:
                self.result.failure = self.result.failure or f"worker {index} exited with status {code}"
            return
        if code == _INVALID_CONFIG:
            self._give_up(f"worker {index} (pid {proc.pid}) exited with status 2 (invalid configuration)")
            return
        recent = [t for t in self._failures[index] if now - t <= self._policy.window_s]
        recent.append(now)
        self._failures[index] = recent
        if len(recent) > self._policy.max_restarts:
            self._give_up(
                f"worker {index} (pid {proc.pid}) exited with status {code}, its failure {len(recent)} "
                f"within {self._policy.window_s:.0f}s (restart limit {self._policy.max_restarts})"
            )
            return
        delay = self._policy.delay(len(recent))
        log.error(
            "worker %d (pid %s) exited with status %d: restarting it in %.1fs (failure %d of %d allowed "
            "within %.0fs; the other workers keep running)",
            index,
            proc.pid,
            code,
            delay,
            len(recent),
            self._policy.max_restarts,
            self._policy.window_s,
        )
        self._restart_at[index] = now + delay

    def _restart_due(self, now: float) -> None:
        for index, due in sorted(self._restart_at.items()):
            if now >= due:
                del self._restart_at[index]
                proc = self.procs[index] = self._start(index)
                log.warning("worker %d restarted: pid %s", index, proc.pid)

    def _give_up(self, why: str) -> None:
        log.error("%s: stopping all workers", why)
        self.result.failure = why
        self._stop.set()


def supervise(
    start: Callable[[int], WorkerProcess],
    workers: int,
    stop: StopFlag,
    *,
    application_id: str,
    policy: RestartPolicy,
    close_timeout_s: float,
    on_stop: Callable[[], None] | None = None,
) -> SupervisionResult:
    """Start ``workers`` processes with ``start(index)`` and supervise them until ``stop``.

    Failed workers are restarted as ``policy`` allows; on ``stop`` (a signal, or giving up)
    every worker gets SIGTERM and ``close_timeout_s`` to close (then SIGKILL).
    ``on_stop`` is called once when stopping begins (to log the signal).
    """
    return _Supervisor(start, workers, stop, policy, close_timeout_s, on_stop, application_id).run()
