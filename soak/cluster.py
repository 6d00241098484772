"""The soak applications' processes: a ``platform-streams run --workers N`` supervisor per
application and, for scaling, a separate instance that comes and goes.

Worker pids come from the supervisor's log ("supervising N workers ...: pids [...]",
"worker i restarted: pid P"); each worker serves HTTP on ``http_port + i`` (the
supervisor's convention), the separate instance on a port of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from platform_streams.dev.brokers.local import find_free_port

REPO = Path(__file__).resolve().parents[1]
#: one set of group timings for every member (Tansu keeps a group's first session timeout);
#: long enough that a loaded 2-core machine does not expire healthy members
TIMING = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000, "max.poll.interval.ms": 60_000}
_PIDS = re.compile(r"supervising \d+ workers of '[^']+': pids \[([\d, ]+)\]")
_RESTARTED = re.compile(r"worker (\d+) restarted: pid (\d+)")


def free_port_pair(count: int) -> int:
    """A port ``p`` with ``p .. p + count - 1`` free now (the supervisor adds the index)."""
    for _ in range(50):
        base = find_free_port()
        if base + count > 65535:
            continue
        if all(_free(base + i) for i in range(1, count)):
            return base
    raise RuntimeError("no run of free ports found")


def _free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class AppSpec:
    """One soak application: its id, guarantee, topics (the ``SOAK_*`` environment) and where
    its processes keep state and logs."""

    name: str
    app_id: str
    guarantee: str
    bootstrap: str
    topics: dict[str, str]
    run_dir: Path
    dead_letter: str
    workers: int = 2

    def settings(self, state_dir: Path, port: int, instance: str | None) -> list[str]:
        """The ``--set`` arguments of one process; ``instance`` None: a dynamic member.

        The supervised workers are static members (``group.instance.id``, as the Helm chart
        sets it; ``run --workers`` appends ``-w<i>``): a worker keeps its identity -- its
        transactional.id -- when its state directory is lost, and on Tansu only the same
        transactional.id settles a killed producer's open transaction, which otherwise
        blocks read_committed readers of its partitions forever. The scaling instance is a
        dynamic member: it leaves for good, and Tansu never expels a static member that
        does not come back (its partitions would stay assigned to nobody)."""
        values = {
            "application.id": self.app_id,
            "bootstrap.servers": self.bootstrap,
            "state.dir": str(state_dir),
            "processing.guarantee": self.guarantee,
            "num.standby.replicas": 1,
            "commit.interval.ms": 500 if self.guarantee == "exactly_once_v2" else 1000,
            "processing.exception.handler": "log_and_continue",
            "errors.dead.letter.queue.topic.name": self.dead_letter,
            "http.port": port,
            "application.server": f"127.0.0.1:{port}",
            **TIMING,
        }
        if instance is not None:
            values["group.instance.id"] = f"{self.app_id}-{instance}"
        return [arg for k, v in values.items() for arg in ("--set", f"{k}={v}")]

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.topics, "PYTHONPATH": _pythonpath()}


def _pythonpath() -> str:
    current = os.environ.get("PYTHONPATH", "")
    return f"{REPO}{os.pathsep}{current}" if current else str(REPO)


def _run_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "platform_streams.cli", "run", "soak.app:topology", *args]


@dataclass
class Supervised:
    """``run --workers N`` of one application; ``pids()`` are its workers' current pids."""

    spec: AppSpec
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(default_factory=Path)

    def start(self) -> Supervised:
        spec = self.spec
        self.port = free_port_pair(spec.workers)
        self.log = spec.run_dir / f"{spec.name}-supervisor.log"
        args = ["--workers", str(spec.workers), "--restart-limit", "1000", "--restart-window", "60"]
        args += ["--restart-backoff", "1", "--close-timeout", "120"]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                _run_command(*args, *spec.settings(spec.run_dir / f"{spec.name}-state", self.port, "sup")),
                stdout=out,
                stderr=out,
                env=spec.env(),
                cwd=REPO,
            )
        return self

    def state_dir(self, index: int) -> Path:
        return self.spec.run_dir / f"{self.spec.name}-state-w{index}"

    def pids(self) -> dict[int, int]:
        """Worker index -> current pid (empty until the supervisor logged its workers)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        found = _PIDS.search(text)
        if not found:
            return {}
        pids = {i: int(p) for i, p in enumerate(found.group(1).split(","))}
        for index, pid in _RESTARTED.findall(text):
            pids[int(index)] = int(pid)
        return pids

    def ports(self) -> list[int]:
        return [self.port + i for i in range(self.spec.workers)]

    def stop(self, timeout_s: float = 180.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            for pid in self.pids().values():
                _kill(pid, signal.SIGKILL)
            return self.proc.wait(30)


@dataclass
class Instance:
    """A separate single-process instance of an application (scale 2 -> 3 -> 2)."""

    spec: AppSpec
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def state_dir(self) -> Path:
        return self.spec.run_dir / f"{self.spec.name}-state-extra"

    @property
    def log(self) -> Path:
        return self.spec.run_dir / f"{self.spec.name}-extra.log"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, wipe_state: bool = False) -> None:
        if wipe_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.port = self.port or find_free_port()
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts} at {time.time():.0f} ---\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                _run_command("--close-timeout", "120", *self.spec.settings(self.state_dir, self.port, None)),
                stdout=out,
                stderr=out,
                env=self.spec.env(),
                cwd=REPO,
            )

    def pid(self) -> int | None:
        return self.proc.pid if self.running() and self.proc else None

    def stop(self, timeout_s: float = 180.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        return self.proc.returncode


def _kill(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


@dataclass
class App:
    """An application under soak: its supervisor and (EOS only) its scaling instance."""

    spec: AppSpec
    supervised: Supervised
    extra: Instance | None = None

    def worker_pids(self) -> dict[str, int]:
        """Name (``w<i>``, ``extra``) -> pid of every process that should be running."""
        out = {f"w{i}": pid for i, pid in self.supervised.pids().items()}
        if self.extra is not None and (pid := self.extra.pid()) is not None:
            out["extra"] = pid
        return out

    def ports(self) -> list[int]:
        ports = self.supervised.ports()
        if self.extra is not None and self.extra.running():
            ports.append(self.extra.port)
        return ports

    def signal(self, worker: str, signum: int) -> int | None:
        pid = self.worker_pids().get(worker)
        if pid is not None and _kill(pid, signum):
            return pid
        return None

    def stop(self) -> dict[str, int | None]:
        status = {}
        if self.extra is not None:
            status["extra"] = self.extra.stop()
        status["supervisor"] = self.supervised.stop()
        return status
