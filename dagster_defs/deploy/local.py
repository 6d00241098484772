"""Worker processes on this machine: the deployment target of the embedded default.

Each worker is one ``platform-streams run`` process (run as ``python -m
platform_streams.cli run``, so the interpreter is the one Dagster runs in), started in its
own session so that it outlives the Dagster run that launched it. What was started is kept
in ``<root>/<app>/deployment.json`` -- PIDs, HTTP endpoints, client ids, state and log
paths -- so any later run, the sensor or a person can find, check and stop the workers.
A file lock serializes launchers working on one application.

Each worker gets its own client id (``<app>-<fingerprint>-w<i>``: the command line that
proves a PID is still ours), state directory (two processes must never open one RocksDB
directory) and HTTP port. A new fingerprint stops every worker before starting the new
ones: instances of one application id must all run the same topology, so a one-by-one
roll would mix sub-topologies in one consumer group.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from dagster_defs.deploy.base import (
    DeploymentRecord,
    DeploymentRequest,
    DeploymentStatus,
    EnsureAction,
    EnsureResult,
    WorkerRecord,
)
from dagster_defs.deploy.worker_client import WorkerClient
from platform_streams.dev.brokers import find_free_port
from platform_streams.runtime.workers.worker_restarts import stop_processes

__all__ = ["LaunchError", "LocalProcessLauncher"]

log = logging.getLogger(__name__)

_POLL_S = 0.1
#: Popen objects of workers this process started, so their exit is reaped (no zombies)
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class LaunchError(RuntimeError):
    """Workers did not start (the message holds the end of the worker's log)."""


def _log_tail(path: str | None, lines: int = 30) -> str:
    if not path:
        return ""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _pid_alive(pid: int | None, marker: str) -> bool:
    """True if ``pid`` runs and its command line holds ``marker`` (PIDs get reused)."""
    if pid is None:
        return False
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        if Path("/proc/self").exists():
            return False
        try:  # no /proc (macOS): the PID alone has to do
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X") and marker.encode() in cmdline


class LocalProcessLauncher:
    """Starts, finds, scales and stops worker processes (see the module docstring)."""

    def __init__(
        self,
        root: str | Path,
        *,
        python: str = sys.executable,
        http_host: str = "127.0.0.1",
        auth_token: str | None = None,
        start_timeout_s: float = 90.0,
        stop_timeout_s: float = 60.0,
        cwd: str | Path | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.python = python
        self.http_host = http_host
        self.auth_token = auth_token
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.cwd = Path(cwd or os.getcwd()).resolve()

    # -- paths and the record -----------------------------------------------------------------

    def app_dir(self, name: str) -> Path:
        return self.root / name

    def _record_path(self, name: str) -> Path:
        return self.app_dir(name) / "deployment.json"

    def read_record(self, name: str) -> DeploymentRecord | None:
        try:
            return DeploymentRecord.from_dict(json.loads(self._record_path(name).read_text()))
        except FileNotFoundError:
            return None

    def _write_record(self, record: DeploymentRecord) -> None:
        record.updated_at = time.time()
        path = self._record_path(record.name)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record.to_dict(), indent=2))
        tmp.replace(path)

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        self.app_dir(name).mkdir(parents=True, exist_ok=True)
        with open(self.app_dir(name) / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def client(self, worker: WorkerRecord) -> WorkerClient:
        if worker.endpoint is None:
            raise LaunchError(f"worker {worker.client_id} has no HTTP endpoint")
        return WorkerClient(worker.endpoint, self.auth_token)

    # -- public API ---------------------------------------------------------------------------

    def status(self, name: str) -> DeploymentStatus:
        record = self.read_record(name)
        if record is None:
            return DeploymentStatus(None)
        alive = [w for w in record.workers if _pid_alive(w.pid, f"client_id={w.client_id}")]
        dead = [w for w in record.workers if w not in alive]
        return DeploymentStatus(record, alive, dead)

    def ensure(self, request: DeploymentRequest) -> EnsureResult:
        """Make the deployment match ``request`` (start, roll, scale, repair or nothing)."""
        with self._locked(request.name):
            found = self.status(request.name)
            record = found.record
            if record is not None and record.scaled_by_operator and record.fingerprint == request.fingerprint:
                request = request.with_workers(record.desired_workers)
            if record is None or not found.deployed:
                return self._start_fresh(request, "started", "no workers were deployed", found)
            if record.fingerprint != request.fingerprint or record.connection != request.connection:
                why = (
                    f"fingerprint {record.fingerprint} -> {request.fingerprint}"
                    if record.fingerprint != request.fingerprint
                    else f"connection {record.connection} -> {request.connection}"
                )
                return self._start_fresh(request, "rolled", why, found)
            if found.dead or len(found.alive) != request.workers:
                return self._reconcile(request, record, found)
            return EnsureResult(
                "unchanged", record, f"{len(found.alive)} workers run fingerprint {record.fingerprint}"
            )

    def scale(self, request: DeploymentRequest, workers: int) -> EnsureResult:
        """Run ``workers`` workers from now on (kept by later materializations)."""
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers} (use stop to stop the application)")
        with self._locked(request.name):
            found = self.status(request.name)
            scaled = request.with_workers(workers)
            if found.record is None or not found.deployed or found.record.fingerprint != request.fingerprint:
                result = self._start_fresh(scaled, "started", f"scaled to {workers}", found)
            else:
                result = self._reconcile(scaled, found.record, found)
            result.record.scaled_by_operator = True
            self._write_record(result.record)
            return result

    def stop(self, name: str) -> DeploymentStatus:
        """Stop every worker (SIGTERM: each commits and leaves the group) and mark it stopped."""
        with self._locked(name):
            found = self.status(name)
            if found.record is None:
                return found
            self._terminate(found.alive)
            found.record.status = "stopped"
            self._write_record(found.record)
            return self.status(name)

    def wipe_local_state(self, name: str) -> list[str]:
        """Delete every worker's state directory (after a reset; workers must be stopped)."""
        import shutil

        found = self.status(name)
        if found.alive:
            raise LaunchError(f"{name}: stop the workers before wiping their state")
        base = self.app_dir(name) / "state"
        removed = []
        if base.exists():
            for child in sorted(base.iterdir()):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(str(child))
        return removed

    # -- internals ----------------------------------------------------------------------------

    def _start_fresh(
        self, request: DeploymentRequest, action: EnsureAction, reason: str, found: DeploymentStatus
    ) -> EnsureResult:
        stopped = list(found.alive)
        self._terminate(stopped)
        record = DeploymentRecord(request.name, request.fingerprint, request.connection, request.workers)
        self._write_record(record)
        config_path = self._write_settings(request)
        started = [self._spawn(request, config_path, i) for i in range(request.workers)]
        record.workers = started
        self._write_record(record)
        self._wait_ready(started)
        return EnsureResult(action, record, reason, stopped=stopped, started=started)

    def _reconcile(
        self, request: DeploymentRequest, record: DeploymentRecord, found: DeploymentStatus
    ) -> EnsureResult:
        """Same fingerprint: replace dead workers and start or stop some to match the count."""
        alive = sorted(found.alive, key=lambda w: w.index)
        extra = alive[request.workers :]
        self._terminate(extra)
        keep = alive[: request.workers]
        used = {w.index for w in keep}
        config_path = self._write_settings(request)
        free = (i for i in range(10_000) if i not in used)
        started = [self._spawn(request, config_path, next(free)) for _ in range(request.workers - len(keep))]
        record.workers = sorted(keep + started, key=lambda w: w.index)
        record.desired_workers = request.workers
        self._write_record(record)
        self._wait_ready(started)
        action: EnsureAction = "repaired" if found.dead and not extra else "scaled"
        reason = f"{len(found.dead)} dead, {len(alive)} alive, {request.workers} wanted"
        return EnsureResult(action, record, reason, stopped=extra, started=started)

    def _write_settings(self, request: DeploymentRequest) -> Path:
        path = self.app_dir(request.name) / "streams.yaml"
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in request.settings.items()}
        path.write_text(
            "# written by the Dagster code location (dagster_defs); do not edit\n" + yaml.safe_dump(settings)
        )
        return path

    def _spawn(self, request: DeploymentRequest, config_path: Path, index: int) -> WorkerRecord:
        app_dir = self.app_dir(request.name)
        client_id = f"{request.name}-{request.fingerprint[:8]}-w{index}"
        state_dir = app_dir / "state" / f"w{index}"
        logs = app_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{client_id}.log"
        port = find_free_port(self.http_host)
        command = [
            self.python, "-m", "platform_streams.cli", "run", request.factory,
            "--config", str(config_path),
            "--set", f"client_id={client_id}",
            "--set", f"state_dir={state_dir}",
            "--set", f"http_host={self.http_host}",
            "--set", f"http_port={port}",
        ]  # fmt: skip
        env = {**os.environ, **request.env, **request.secret_env, "PYTHONUNBUFFERED": "1"}
        if self.auth_token:
            env["PLATFORM_STREAMS_HTTP_AUTH_TOKEN"] = self.auth_token
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=env,
                start_new_session=True,  # outlives the Dagster run; not hit by its Ctrl-C
            )
        _CHILDREN[proc.pid] = proc
        log.info("started worker %s (pid %d, http://%s:%d)", client_id, proc.pid, self.http_host, port)
        return WorkerRecord(
            index=index,
            client_id=client_id,
            endpoint=f"http://{self.http_host}:{port}",
            pid=proc.pid,
            state_dir=str(state_dir),
            log_path=str(log_path),
        )

    def _wait_ready(self, workers: list[WorkerRecord]) -> None:
        """Wait until every new worker reports ready (RUNNING, nothing restoring)."""
        deadline = time.monotonic() + self.start_timeout_s
        waiting = list(workers)
        while waiting:
            for worker in list(waiting):
                child = _CHILDREN.get(worker.pid or -1)
                status = child.poll() if child is not None else None  # before _pid_alive reaps it
                # A child of this process is judged by its exit status alone: its command line
                # can be read before the new program's is in place (a loaded machine), which
                # made a starting worker look gone. Others (a record from another run) by PID.
                if child is not None:
                    exited = status is not None
                else:
                    exited = not _pid_alive(worker.pid, f"client_id={worker.client_id}")
                if exited:
                    raise LaunchError(
                        f"worker {worker.client_id} (pid {worker.pid}) exited while starting"
                        f"{'' if status is None else f' with status {status}'}; "
                        f"its log ({worker.log_path}) ends:\n" + _log_tail(worker.log_path)
                    )
                if self.client(worker).ready():
                    waiting.remove(worker)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(w.client_id for w in waiting)
                raise LaunchError(
                    f"workers {names} not ready after {self.start_timeout_s:.0f}s; the log of "
                    f"{waiting[0].client_id} ends:\n{_log_tail(waiting[0].log_path)}"
                )
            if waiting:
                time.sleep(_POLL_S)

    def _terminate(self, workers: list[WorkerRecord]) -> None:
        """SIGTERM (clean close: commit, leave the group), then SIGKILL after the timeout:
        the one way every launcher stops workers (:func:`stop_processes`)."""
        running = [_RecordedWorker(w) for w in workers if _pid_alive(w.pid, f"client_id={w.client_id}")]
        stop_processes(list(running), self.stop_timeout_s, poll_s=_POLL_S)
        for worker in workers:
            child = _CHILDREN.pop(worker.pid or -1, None)
            if child is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(5)


class _RecordedWorker:
    """A recorded worker seen as a :class:`WorkerProcess` (it may not be our child: the
    process of an earlier Dagster run is found by PID and its ``client_id`` marker)."""

    def __init__(self, worker: WorkerRecord) -> None:
        assert worker.pid is not None
        self.worker = worker
        self.pid: int | None = worker.pid

    def poll(self) -> int | None:
        return None if _pid_alive(self.worker.pid, f"client_id={self.worker.client_id}") else 0

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)


def describe_record(record: DeploymentRecord) -> dict[str, Any]:
    """The record as Dagster metadata likes it (plain JSON)."""
    return record.to_dict()
