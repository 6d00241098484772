"""What every local broker process shares, Tansu's or Apache Kafka's.

:class:`~platform_streams.dev.brokers.embedded.EmbeddedBroker` (Tansu) and
:class:`~platform_streams.dev.brokers.apache.ApacheKafkaBroker` are both one child
process on a loopback port with a log file; the CLI's ``broker`` command, the demo and the
test fixtures take either. This module holds the address, process and context-manager
parts they share, free-port and ``host:port`` helpers, the ``setpriv --pdeathsig`` prefix
that makes a broker die with the process that started it, and :func:`run_broker_forever`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

from platform_streams.errors import BrokerError, IllegalStateError
from platform_streams.stop_request import StopRequest

__all__ = ["BrokerProcess", "find_free_port", "hostport", "kill_with_parent_prefix", "run_broker_forever"]


def hostport(host: str, port: int) -> str:
    """``host:port`` for a client config (IPv6 hosts in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def find_free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def kill_with_parent_prefix(enabled: bool) -> list[str]:
    """The command prefix that makes a child die with its parent (``setpriv --pdeathsig``).

    Empty when not ``enabled`` or not on Linux / without ``setpriv``.
    """
    setpriv = shutil.which("setpriv") if enabled and sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class BrokerProcess:
    """A broker child process on ``host:port``: address, pid, log, context manager.

    Subclasses implement :meth:`start` (which sets ``_port`` and ``_proc``), :meth:`stop`
    and :meth:`log_tail`.
    """

    _kind = "broker"

    def __init__(self, host: str, port: int | None, log_path: str | os.PathLike[str] | None) -> None:
        self._host = host
        self._port = port
        self._log_path = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The listening port; known once started (or when given to the constructor)."""
        if self._port is None:
            raise IllegalStateError(f"the {self._kind} has no port yet: call start() first")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """The ``bootstrap.servers`` value clients use to reach this broker."""
        return hostport(self._host, self.port)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _end_process(self, sig: int, grace: float) -> None:
        """Send ``sig`` to our own child only, SIGKILL it after ``grace`` s, forget it."""
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def log_tail(self, max_lines: int = 40) -> str:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def run_broker_forever(broker: BrokerProcess, description: str) -> None:
    """Run ``broker`` until SIGINT/SIGTERM (the CLI's ``broker`` command); main thread only.

    Prints the bootstrap address on stdout so scripts can pick it up. Raises
    :class:`BrokerError` if the broker process dies on its own.
    """
    stop_requested = StopRequest()
    with stop_requested.on_signals():  # through the broker's stop: a signal must not cut it short
        try:
            _serve(broker, description, stop_requested)
        finally:
            broker.stop()


def _serve(broker: BrokerProcess, description: str, stop_requested: StopRequest) -> None:
    broker.start()
    print(
        f"{description} ready: bootstrap.servers={broker.bootstrap_servers} "
        f"(pid {broker.pid}, log {broker.log_path}); Ctrl-C to stop",
        flush=True,
    )
    while not stop_requested.wait(0.5):
        if not broker.is_running():
            raise BrokerError(f"{description} exited unexpectedly; log tail:\n{broker.log_tail()}")
