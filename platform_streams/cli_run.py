"""``platform-streams run``: one application process, or a supervisor of several.

Why processes: under the GIL a :class:`KafkaStreams` client uses about one core however
many stream threads it has, so ``--workers N`` starts N OS processes of the same
application (same ``application.id``, so they share the partitions through the consumer
group). Each is this command re-invoked with ``--workers 1`` and its own client id and
state directory (suffix ``-w<i>``: two processes must never open the same RocksDB
directory). The supervisor forwards SIGTERM/SIGINT, restarts a worker that fails with
backoff while the others keep running (``--restart-limit``/``--restart-window``/
``--restart-backoff``, see runtime/workers/worker_restarts.py), stops all when one keeps failing
and says why, and exits when all have exited. Children run in their own process group (a terminal's Ctrl-C
reaches them once, through the supervisor) and get SIGTERM if the supervisor dies.

Exit status: 0 after a clean stop on SIGTERM/SIGINT (``close()`` commits), 1 when the
application fails or does not stop in time, 2 for usage and configuration errors, 3 when
no bootstrap address accepts a connection.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import math
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from platform_streams.cli_app_loader import (
    BROKER_UNREACHABLE,
    CliError,
    add_app_argument,
    add_config_arguments,
    load_app,
    load_config,
)
from platform_streams.config import StreamsConfig
from platform_streams.errors import (
    BrokerUnreachableError,
    MissingSinkTopicError,
    MissingSourceTopicError,
    StreamsConfigError,
    StreamsError,
)
from platform_streams.kafka_streams import KafkaStreams
from platform_streams.process_supervisor import worker_overrides as supervisor_overrides
from platform_streams.runtime.lifecycle import State
from platform_streams.runtime.workers.worker_restarts import RestartPolicy, supervise
from platform_streams.state.private_files import make_private_dirs
from platform_streams.stop_request import StopRequest
from platform_streams.topology.topology import Topology

__all__ = ["add_run_arguments", "run_command", "run_streams"]

log = logging.getLogger("platform_streams.cli")

_PR_SET_PDEATHSIG = 1
_N = TypeVar("_N", int, float)


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
        type=_non_negative_float,
        default=60.0,
        metavar="SECONDS",
        help="how long close() may take after SIGTERM before the exit is reported as failed (default 60)",
    )
    restarts = RestartPolicy()
    parser.add_argument(
        "--restart-limit",
        type=_non_negative_int,
        default=restarts.max_restarts,
        metavar="N",
        help="--workers: restarts of one failed worker allowed within --restart-window; one more "
        f"failure stops all workers (default {restarts.max_restarts}; 0: the first failure stops all)",
    )
    parser.add_argument(
        "--restart-window",
        type=_positive_float,
        default=restarts.window_s,
        metavar="SECONDS",
        help=f"--workers: the window failures are counted in (default {restarts.window_s:.0f})",
    )
    parser.add_argument(
        "--restart-backoff",
        type=_non_negative_float,
        default=restarts.backoff_s,
        metavar="SECONDS",
        help="--workers: wait before restarting a failed worker, doubled per recent failure up to "
        f"{restarts.max_backoff_s:.0f}s (default {restarts.backoff_s:.0f})",
    )


def run_command(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    config = load_config(args.config, args.overrides, app.settings)
    if args.workers > 1:
        for index in range(args.workers):  # an unusable state_dir fails here, once, with exit 2
            make_private_dirs(Path(supervisor_overrides(config, index)["state_dir"]))
        return _supervise(args, config)
    try:
        return run_streams(app.topology, config, close_timeout_s=args.close_timeout)
    except CliError as exc:
        if isinstance(exc.__cause__, (MissingSourceTopicError, MissingSinkTopicError)):
            raise CliError(f"{exc}; {_create_io_hint(args)}", exc.exit_code) from exc.__cause__
        raise


def _create_io_hint(args: argparse.Namespace) -> str:
    """The command that creates the missing input/output topics, with this run's settings."""
    command = ["platform-streams", "topics", "create-io", args.app]
    if args.config is not None:
        command += ["--config", str(args.config)]
    for item in args.overrides:
        command += ["--set", item]
    return f"for development, create them (1 partition; --partitions N for more) with: {shlex.join(command)}"


def run_streams(topology: Topology, config: StreamsConfig, *, close_timeout_s: float = 60.0) -> int:
    """Run ``topology`` until SIGTERM/SIGINT (exit 0) or until it fails (CliError, exit 1)."""
    stop = StopRequest()
    streams = KafkaStreams(topology, config)
    failing = (State.PENDING_ERROR, State.ERROR)
    streams.set_state_listener(lambda new, old: stop.set() if new in failing else None)
    log.debug("settings: %s", config.redacted())
    with stop.on_signals(exit_on_second=True) as signals:
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
        except BrokerUnreachableError as exc:
            raise CliError(f"cannot start {config.application_id!r}: {exc}", BROKER_UNREACHABLE) from exc
        except StreamsError as exc:
            raise CliError(f"cannot start {config.application_id!r}: {exc}", exit_code=1) from exc
        while not stop.wait(0.5):
            pass
        if signals.signum is not None:
            log.info("%s received: closing (final commit)", signal.Signals(signals.signum).name)
        closed = streams.close(timeout_s=close_timeout_s)
        if streams.state() is State.PENDING_ERROR:
            streams.wait_for_state(State.ERROR, timeout_s=close_timeout_s)
    failure = streams.failure()
    if streams.state() is State.ERROR or failure is not None:
        detail = f"{type(failure).__name__}: {failure}" if failure is not None else "a worker died"
        raise CliError(f"application {config.application_id!r} failed: {detail}", exit_code=1) from failure
    if not closed:
        raise CliError(f"application {config.application_id!r} did not stop within {close_timeout_s}s", 1)
    log.info("application %r stopped cleanly", config.application_id)
    return 0


# ---------------------------------------------------------------------------- supervisor


def worker_overrides(config: StreamsConfig, index: int) -> list[str]:
    """The ``--set`` items that make worker ``index`` a distinct member with its own state
    (the same settings as the Python API's ``run_workers``, see process_supervisor.py)."""
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
    stop = StopRequest()
    policy = RestartPolicy(
        max_restarts=args.restart_limit, window_s=args.restart_window, backoff_s=args.restart_backoff
    )

    def start(index: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            _worker_argv(args, config, index),
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

    with stop.on_signals(exit_on_second=True) as signals:

        def on_stop() -> None:
            if signals.signum is not None:
                log.info(
                    "%s received: stopping %d workers", signal.Signals(signals.signum).name, args.workers
                )

        result = supervise(
            start,
            args.workers,
            stop,
            application_id=config.application_id,
            policy=policy,
            close_timeout_s=args.close_timeout,
            on_stop=on_stop,
        )
    if result.failure is not None:
        raise CliError(f"{config.application_id!r}: {result.failure}", exit_code=1)
    log.info("all %d workers stopped cleanly", args.workers)
    return 0


def _at_least(parse: Callable[[str], _N], minimum: _N, *, strict: bool = False) -> Callable[[str], _N]:
    """An argparse ``type``: ``parse`` the text and require a finite number ``>= minimum``
    (``> minimum`` if strict). float() takes "nan" and "inf", and every comparison with nan is
    false: a nan backoff or timeout would pass a plain range check."""

    def check(text: str) -> _N:
        value = parse(text)
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(
                f"must be a finite number {'>' if strict else '>='} {minimum}, got {text!r}"
            )
        return value

    check.__name__ = parse.__name__  # argparse names it in "invalid int value: 'x'"
    return check


def _digits(text: str) -> int:
    """int() of whole numbers in digits only: int() alone takes "1_0" as 10 (as settings do not)."""
    if not text.strip().lstrip("+-").isdigit() or not text.strip().isascii():
        raise ValueError(text)
    return int(text)


_digits.__name__ = "int"  # argparse: "invalid int value: '1_0'"
_positive_int = _at_least(_digits, 1)
_non_negative_int = _at_least(_digits, 0)
_non_negative_float = _at_least(float, 0.0)
_positive_float = _at_least(float, 0.0, strict=True)
