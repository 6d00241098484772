"""Scale-out on one host: run an application in N worker processes (``run_workers``).

Why processes: under the GIL one :class:`KafkaStreams` uses about one core however many
stream threads it has. Each worker process is a full client of the same application: a
member of its consumer group (the range assignor shares the partitions out), with its own
state directory and, with static membership, its own ``group_instance_id``:

* ``client_id``: ``<client id>-w<i>``;
* ``state_dir``: ``<state_dir>-w<i>`` (RocksDB directories and the state lock are per process);
* ``group_instance_id``: ``<group_instance_id>-w<i>`` when one is set;
* ``http_port`` / ``application_server`` port: ``+ i`` when set (one endpoint per process).

That is also what ``platform-streams run --workers N`` does (it re-invokes the command per
worker with these overrides, see :func:`worker_overrides`), so a worker keeps its identity
-- state directory, transactional.id, static member id -- across restarts of the
supervisor, and the two ways of starting workers are interchangeable.

The supervisor forwards SIGTERM/SIGINT to the workers (each closes cleanly: final commit),
restarts a worker that fails with backoff while the others keep running, stops them all
when one keeps failing (:mod:`.worker_restarts`), and returns 0 after a clean stop, 1
after a failure.
The factory must be importable by the children (a module-level function): workers are
started with the ``spawn`` method, so nothing of the parent's state leaks into them.
"""

from __future__ import annotations

import logging
import multiprocessing
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.kafka_streams import KafkaStreams
from platform_streams.runtime.lifecycle import State
from platform_streams.runtime.workers.worker_restarts import RestartPolicy, supervise
from platform_streams.stop_request import StopRequest

__all__ = [
    "existing_worker_state_dirs",
    "run_worker",
    "run_workers",
    "worker_config",
    "worker_overrides",
    "worker_state_dir",
]

log = logging.getLogger(__name__)

#: a module-level callable returning a Topology or a StreamsBuilder
TopologyFactory = Callable[[], Any]


def worker_state_dir(state_dir: Path, index: int) -> Path:
    """``<state_dir>-w<index>``: the state directory of worker process ``index``."""
    return Path(f"{state_dir}-w{index}")


def existing_worker_state_dirs(state_dir: Path) -> list[Path]:
    """The ``<state_dir>-w<i>`` directories on this machine (of any earlier ``--workers N``)."""
    base = Path(state_dir)
    pattern = re.compile(re.escape(base.name) + r"-w\d+")
    if not base.parent.is_dir():
        return []
    found = [p for p in base.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.rsplit("-w", 1)[1]))


def worker_overrides(config: StreamsConfig, index: int) -> dict[str, Any]:
    """The settings that make worker process ``index`` a member of its own (see module docstring)."""
    overrides: dict[str, Any] = {
        "client_id": f"{config.effective_client_id}-w{index}",
        "state_dir": worker_state_dir(config.state_dir, index),
    }
    if config.group_instance_id is not None:
        overrides["group_instance_id"] = f"{config.group_instance_id}-w{index}"
    # each process serves its own /metrics and queries: a fixed port becomes port + index
    if config.http_port:
        overrides["http_port"] = config.http_port + index
    if config.application_server is not None:
        host, _, port = config.application_server.rpartition(":")
        overrides["application_server"] = f"{host}:{int(port) + index}"
    return overrides


def worker_config(config: StreamsConfig, index: int) -> StreamsConfig:
    return config.with_overrides(**worker_overrides(config, index))


def run_worker(factory: TopologyFactory, config: StreamsConfig, close_timeout_s: float = 60.0) -> int:
    """Run one client until SIGTERM/SIGINT (exit 0) or until it fails (exit 1): a worker's body."""
    stop = StopRequest()
    with stop.on_signals():  # through the close too: a second signal must not cut it short
        streams = KafkaStreams(factory(), config)
        streams.set_state_listener(
            lambda new, old: stop.set() if new in (State.PENDING_ERROR, State.ERROR) else None
        )
        streams.start()
        while not stop.wait(0.5):
            pass
        closed = streams.close(timeout_s=close_timeout_s)
        if streams.state() is State.PENDING_ERROR:
            streams.wait_for_state(State.ERROR, timeout_s=close_timeout_s)
    return 0 if closed and streams.state() is State.NOT_RUNNING and streams.failure() is None else 1


def _child(factory: TopologyFactory, config: StreamsConfig, close_timeout_s: float, level: int) -> None:
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s [pid %(process)d] %(name)s: %(message)s"
    )
    raise SystemExit(run_worker(factory, config, close_timeout_s))


def run_workers(
    factory: TopologyFactory,
    config: StreamsConfig,
    workers: int,
    *,
    close_timeout_s: float = 60.0,
    stop: threading.Event | None = None,
    restart_policy: RestartPolicy | None = None,
) -> int:
    """Run the application in ``workers`` processes until SIGTERM/SIGINT (or ``stop``).

    A worker that fails is restarted as ``restart_policy`` allows (default
    :class:`RestartPolicy`: 3 restarts per worker within 5 minutes, backoff from 1 s);
    past that every worker is stopped. Returns 0 when every worker stopped cleanly, 1 when
    the supervisor gave up on a worker or one did not stop within ``close_timeout_s``.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    request = StopRequest(stop)
    context = multiprocessing.get_context("spawn")
    level = logging.getLogger().getEffectiveLevel()
    started: list[_SpawnedWorker] = []

    def start(index: int) -> _SpawnedWorker:
        proc = context.Process(
            target=_child,
            args=(factory, worker_config(config, index), close_timeout_s, level),
            name=f"{config.application_id}-w{index}",
        )
        proc.start()
        started.append(_SpawnedWorker(proc))
        return started[-1]

    try:
        with request.on_signals():
            result = supervise(
                start,
                workers,
                request,
                application_id=config.application_id,
                policy=restart_policy or RestartPolicy(),
                close_timeout_s=close_timeout_s,
                on_stop=lambda: log.info("stopping the workers of %r", config.application_id),
            )
        if result.failure is not None:
            log.error("workers of %r failed: %s", config.application_id, result.failure)
        return result.exit_status
    finally:
        for worker in started:
            if worker.proc.is_alive():
                worker.proc.kill()
                worker.proc.join(5)


class _SpawnedWorker:
    """A ``multiprocessing.Process`` seen as a :class:`WorkerProcess` (``poll`` like Popen's)."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    @property
    def pid(self) -> int | None:
        return int(self.proc.pid) if self.proc.pid is not None else None

    def poll(self) -> int | None:
        code = self.proc.exitcode
        return None if code is None else int(code)

    def terminate(self) -> None:
        self.proc.terminate()

    def kill(self) -> None:
        self.proc.kill()
