"""Every process a test started, found again by a mark in its environment, so none outlives it.

Why a mark, not the process tree or a process group: the demo and the Dagster UI test start
processes that leave both on purpose. ``dagster-webserver``/``dagster-daemon`` and the
launcher's workers run in their own sessions (``start_new_session``, so a Ctrl-C reaches
them once), and a worker's parent, the Dagster run, exits while the worker runs on, so the
worker is re-parented to init. When pytest-timeout stops such a test, killing the one child
it knows leaves the rest running for the rest of CI, holding ports, CPU and a consumer group.
Environment variables are inherited by every descendant whatever its session or parent
(each of these starters copies ``os.environ``), so ``/proc/<pid>/environ`` finds them all,
and only them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

__all__ = ["MARK_VARIABLE", "kill_marked", "marked_env", "marked_pids", "new_mark", "stop_process"]

MARK_VARIABLE = "PS_TEST_PROCESS_MARK"  # not PLATFORM_STREAMS_*: workers refuse unknown ones


def new_mark() -> str:
    return uuid.uuid4().hex


def marked_env(env: Mapping[str, str], mark: str) -> dict[str, str]:
    """``env`` with the mark that :func:`marked_pids` looks for."""
    return {**env, MARK_VARIABLE: mark}


def marked_pids(mark: str) -> list[int]:
    """The live processes (not zombies) whose environment holds ``mark``; never this one."""
    needle = f"{MARK_VARIABLE}={mark}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if state not in ("Z", "X") and needle in environ.split(b"\0"):
            found.append(int(proc.name))
    return found


def kill_marked(mark: str, grace_s: float = 20.0) -> list[int]:
    """SIGTERM every process carrying ``mark``, SIGKILL what is left after ``grace_s``, and
    wait (bounded) until none is left. Returns the PIDs that were still running."""
    first = marked_pids(mark)
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        pids = marked_pids(mark)
        for pid in pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.2)
            pids = marked_pids(mark)
        if not pids:
            break
    return first


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM a server a fixture started, SIGKILL it if it has not exited within ``timeout_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout_s)
