"""Carrying out the fault schedule against the running applications and the broker.

Each fault is logged with the wall time it ran and the pids it hit. Faults that leave an
exactly-once producer's transaction open (SIGKILL, a SIGSTOP past the session timeout that
gets the process fenced) record the pid in ``leaky_pids``: on Tansu that transaction is
committed by the next ``init_transactions`` instead of aborted (../shared/BROKER.md), and
the checker reports duplicates first written by such a pid as ``broker_leaked``.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from soak.app import COUNTS_STORE, WINDOWS_STORE
from soak.cluster import TIMING, App
from soak.producer import Producer
from soak.schedule import Fault

log = logging.getLogger("soak.faults")

SESSION_S = TIMING["session.timeout.ms"] / 1000
STOP_PAST_SESSION_S = SESSION_S + 6
BROKER_PAUSE_S = 6.0
BURST_S = 3.0
_BAD_PATHS = (
    "/stores/no-such-store/keys/k1",
    f"/stores/{COUNTS_STORE}/range?limit=-5",
    f"/stores/{COUNTS_STORE}/range?limit=abc",
    f"/stores/{WINDOWS_STORE}/windows/k1?from=x&to=y",
    f"/stores/{COUNTS_STORE}/keys/" + "x" * 5000,
    "/%ff%fe/../..",
    "/control/bogus",
    "/stores//keys/",
)


def http_get(port: int, path: str, timeout_s: float = 10.0) -> tuple[int, bytes]:
    """Status and body of ``GET path`` (status 0: no connection)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ValueError):
        return 0, b""


class FaultRunner:
    """Runs faults one after the other on a thread, at their scheduled offsets."""

    def __init__(
        self, apps: dict[str, App], producer: Producer, broker_pid: int | None, keys: int, seed: int
    ) -> None:
        self.apps = apps
        self.producer = producer
        self.broker_pid = broker_pid
        self.keys = keys
        self.rng = random.Random(seed + 1)
        self.done: list[dict[str, Any]] = []
        self.leaky_pids: dict[int, float] = {}
        self.http: dict[str, int] = {"requests": 0, "ok": 0, "client_errors": 0, "unavailable": 0}
        self.http_5xx: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, faults: list[Fault], t0: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(faults, t0), name="soak-faults", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(120)

    def _run(self, faults: list[Fault], t0: float) -> None:
        for fault in faults:
            if self._stop.wait(max(0.0, t0 + fault.at_s - time.monotonic())):
                return
            started = time.time()
            try:
                detail = self._do(fault)
            except Exception as exc:  # a fault that could not be applied is reported, not fatal
                log.exception("fault %s failed", fault.describe())
                detail = f"error: {exc!r}"
            entry = {**fault.to_dict(), "wall": started, "ran_at_s": round(time.monotonic() - t0, 1)}
            entry["detail"] = detail
            self.done.append(entry)
            print(f"soak: fault {fault.describe()} -> {detail}", flush=True)

    def _leak(self, app: str, pid: int | None) -> None:
        if pid is not None and self.apps[app].spec.guarantee == "exactly_once_v2":
            self.leaky_pids[pid] = time.time()

    def _do(self, fault: Fault) -> str:
        handler: Callable[[Fault], str] = getattr(self, f"_{fault.kind}")
        return handler(fault)

    def _kill9(self, fault: Fault) -> str:
        pid = self.apps[fault.app].signal(fault.worker, signal.SIGKILL)
        self._leak(fault.app, pid)
        return f"SIGKILL pid {pid}" if pid else "no such worker now (skipped)"

    def _sigstop(self, fault: Fault) -> str:
        app = self.apps[fault.app]
        pid = app.signal(fault.worker, signal.SIGSTOP)
        if pid is None:
            return "no such worker now (skipped)"
        self._leak(fault.app, pid)
        self._stop.wait(STOP_PAST_SESSION_S)
        os.kill(pid, signal.SIGCONT)
        return f"SIGSTOP pid {pid} for {STOP_PAST_SESSION_S:.0f}s, SIGCONT"

    def _state_delete(self, fault: Fault) -> str:
        app = self.apps[fault.app]
        pid = app.signal(fault.worker, signal.SIGSTOP)
        if pid is None:
            return "no such worker now (skipped)"
        state_dir = app.supervised.state_dir(int(fault.worker[1:]))
        shutil.rmtree(state_dir, ignore_errors=True)
        os.kill(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
        self._leak(fault.app, pid)
        return f"SIGSTOP pid {pid}, deleted {state_dir.name}, SIGKILL"

    def _scale_up(self, fault: Fault) -> str:
        extra = self.apps[fault.app].extra
        assert extra is not None
        if extra.running():
            return "already 3 workers (skipped)"
        extra.start(wipe_state=fault.wipe)
        return f"started the third worker pid {extra.pid()}" + (
            " on an empty state dir" if fault.wipe else ""
        )

    def _scale_down(self, fault: Fault) -> str:
        extra = self.apps[fault.app].extra
        assert extra is not None
        if not extra.running():
            return "already 2 workers (skipped)"
        pid = extra.pid()
        status = extra.stop()
        return f"SIGTERM pid {pid}: exit status {status}"

    def _broker_pause(self, fault: Fault) -> str:
        if self.broker_pid is None:
            return "external broker (skipped)"
        os.kill(self.broker_pid, signal.SIGSTOP)
        try:
            self._stop.wait(BROKER_PAUSE_S)
        finally:
            os.kill(self.broker_pid, signal.SIGCONT)
        return f"SIGSTOP broker pid {self.broker_pid} for {BROKER_PAUSE_S:.0f}s, SIGCONT"

    def _poison(self, fault: Fault) -> str:
        return f"produced {self.producer.poison()}"

    def _http_burst(self, fault: Fault) -> str:
        ports = self.apps[fault.app].ports()
        good = ["/state", "/health/ready", "/stores", f"/stores/{COUNTS_STORE}/range?limit=50"]
        counts = {"requests": 0, "5xx": 0}
        deadline = time.monotonic() + BURST_S

        def hammer(seed: int) -> None:
            rng = random.Random(seed)
            while time.monotonic() < deadline:
                key = f"k{rng.randrange(self.keys)}"
                path = rng.choice(
                    [
                        *good,
                        f"/stores/{COUNTS_STORE}/keys/{key}",
                        f"/stores/{WINDOWS_STORE}/windows/{key}",
                        *_BAD_PATHS,
                    ]
                )
                status, body = http_get(rng.choice(ports), path)
                counts["requests"] += 1
                self._classify(status, path, body)

        threads = [threading.Thread(target=hammer, args=(self.rng.random(),)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return f"{counts['requests']} requests at ports {ports}"

    def _classify(self, status: int, path: str, body: bytes) -> None:
        self.http["requests"] += 1
        if status == 0 or status == 503:
            self.http["unavailable"] += 1
        elif status >= 500:
            self.http_5xx.append(f"{status} {path[:80]}: {body[:200]!r}")
        elif status >= 400:
            self.http["client_errors"] += 1
        else:
            self.http["ok"] += 1
