"""``platform-streams run``: one application process, or a supervisor of several.

Why processes: under the GIL a :class:`KafkaStreams` client uses about one core however
many stream threads it has, so ``--workers N`` starts N OS processes of the same
application (same ``application.id``, so they share the partitions through the consumer
group). Each is this command re-invoked with ``--workers 1`` and its own client id and
state directory (suffix ``-w<i>``: two processes must never open the same RocksDB
directory). The supervisor forwards SIGTERM/SIGINT, stops the rest when one fails, and
exits when all have exited. Children run in their own process group (a terminal's Ctrl-C
reaches them once, through the supervisor) and get SIGTERM if the supervisor dies.

Exit status: 0 after a clean stop on SIGTERM/SIGINT (``close()`` commits), 1 when the
application fails or does not stop in time, 2 for usage and configuration errors.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType, TracebackType

from platform_streams.cli_app import CliError, add_app_argument, add_config_arguments, load_app, load_config
from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError, StreamsError
from platform_streams.runtime.kafka_streams import KafkaStreams
from platform_streams.runtime.lifecycle import State
from platform_streams.runtime.supervisor import worker_overrides as supervisor_overrides
from platform_streams.state.private_files import make_private_dirs
from platform_streams.topology.topology import Topology

__all__ = ["add_run_arguments", "run_command", "run_streams"]

log = logging.getLogger("platform_streams.cli")

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_PR_SET_PDEATHSIG = 1
_KILL_GRACE_S = 10.0


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_app_argument(parser)
    add_config_arguments(parser)
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        metavar="N",
        help="OS processes to run the application in (default 1); each adds about one core",
    )
    parser.add_argument(
        "--close-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long close() may take after SIGTERM before the exit is reported as failed (default 60)",
    )


def run_command(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    if args.workers > 1:
        for index in range(args.workers):  # an unusable state_dir fails here, once, with exit 2
            make_private_dirs(Path(supervisor_overrides(config, index)["state_dir"]))
        return _supervise(args, config)
    return run_streams(app.topology, config, close_timeout_s=args.close_timeout)


class StopOnSignal:
    """While active, SIGTERM/SIGINT set ``event``; a second signal exits at once."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            os.write(2, f"platform-streams: second {signal.Signals(signum).name}, exiting now\n".encode())
            os._exit(128 + signum)
        self.signum = signum
        self.event.set()

    def __enter__(self) -> StopOnSignal:
        self._previous = {sig: signal.signal(sig, self._handle) for sig in _STOP_SIGNALS}
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def run_streams(topology: Topology, config: StreamsConfig, *, close_timeout_s: float = 60.0) -> int:
    """Run ``topology`` until SIGTERM/SIGINT (exit 0) or until it fails (CliError, exit 1)."""
    stop = threading.Event()
    streams = KafkaStreams(topology, config)
    failing = (State.PENDING_ERROR, State.ERROR)
    streams.set_state_listener(lambda new, old: stop.set() if new in failing else None)
    log.debug("settings: %s", config.redacted())
    with StopOnSignal(stop) as signals:
        log.info(
            "starting application %r: bootstrap %s, state dir %s, %d stream thread(s); "
            "SIGTERM or Ctrl-C stops it",
            config.application_id,
            config.bootstrap_servers,
            config.state_dir,
            config.num_stream_threads,
        )
        try:
            streams.start()
        except StreamsConfigError as exc:
            raise CliError(f"cannot start {config.application_id!r}: {exc}") from exc
        except StreamsError as exc:
            raise CliError(f"cannot start {config.application_id!r}: {exc}", exit_code=1) from exc
        while not stop.wait(0.5):
            pass
        if signals.signum is not None:
            log.info("%s received: closing (final commit)", signal.Signals(signals.signum).name)
        closed = streams.close(timeout_s=close_timeout_s)
        if streams.state() is State.PENDING_ERROR:
            streams.wait_for_state(State.ERROR, timeout_s=close_timeout_s)
    if streams.state() is State.ERROR:
        failure = next((w.failure for w in streams.workers if w.failure is not None), None)
        detail = f"{type(failure).__name__}: {failure}" if failure is not None else "a worker died"
        raise CliError(f"application {config.application_id!r} failed: {detail}", exit_code=1) from failure
    if not closed:
        raise CliError(f"application {config.application_id!r} did not stop within {close_timeout_s}s", 1)
    log.info("application %r stopped cleanly", config.application_id)
    return 0


# ---------------------------------------------------------------------------- supervisor


def worker_overrides(config: StreamsConfig, index: int) -> list[str]:
    """The ``--set`` items that make worker ``index`` a distinct member with its own state
    (the same settings as the Python API's ``run_workers``, see runtime/supervisor.py)."""
    return [f"{key}={value}" for key, value in supervisor_overrides(config, index).items()]


def _worker_argv(args: argparse.Namespace, config: StreamsConfig, index: int) -> list[str]:
    argv = [sys.executable, "-m", "platform_streams.cli", "--log-level", args.log_level, "run", args.app]
    if args.config is not None:
        argv += ["--config", str(args.config)]
    for item in [*args.overrides, *worker_overrides(config, index)]:
        argv += ["--set", item]
    return [*argv, "--workers", "1", "--close-timeout", str(args.close_timeout)]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM when the supervisor dies (even of SIGKILL)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _supervise(args: argparse.Namespace, config: StreamsConfig) -> int:
    stop = threading.Event()
    procs: list[subprocess.Popen[bytes]] = []
    with StopOnSignal(stop) as signals:
        for index in range(args.workers):
            procs.append(
                subprocess.Popen(
                    _worker_argv(args, config, index),
                    stdin=subprocess.DEVNULL,
                    process_group=0,
                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                )
            )
        log.info(
            "supervising %d workers of %r: pids %s", len(procs), config.application_id, [p.pid for p in procs]
        )
        return _wait_for_workers(procs, stop, signals, args.close_timeout)


def _wait_for_workers(
    procs: Sequence[subprocess.Popen[bytes]],
    stop: threading.Event,
    signals: StopOnSignal,
    close_timeout: float,
) -> int:
    first_failure: int | None = None
    kill_at: float | None = None
    while True:
        codes = [p.poll() for p in procs]
        for index, code in enumerate(codes):
            if code not in (None, 0) and first_failure is None:
                first_failure = code
                log.error(
                    "worker %d (pid %d) exited with status %d: stopping the others",
                    index,
                    procs[index].pid,
                    code,
                )
                stop.set()
        if all(code is not None for code in codes):
            break
        if stop.is_set() and kill_at is None:
            if signals.signum is not None:
                log.info("%s received: stopping %d workers", signal.Signals(signals.signum).name, len(procs))
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            kill_at = time.monotonic() + close_timeout + _KILL_GRACE_S
        if kill_at is not None and time.monotonic() > kill_at:
            for proc in procs:
                if proc.poll() is None:
                    log.error("worker pid %d did not stop in time: killing it", proc.pid)
                    proc.kill()
            first_failure = first_failure or 1
        stop.wait(0.2)
    if first_failure is not None:
        raise CliError(f"a worker failed (exit status {first_failure})", exit_code=1)
    log.info("all %d workers stopped cleanly", len(procs))
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
