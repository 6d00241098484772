"""Helpers of the interactive-query and metrics suites: the count app, HTTP calls, runner processes.

The app counts records per String key into the store ``counts`` (the KTable behind
``group_by_key().count()``), so expected values are easy to compute from what a test
produced. :class:`QueryProcess` runs it in its own OS process (``iq_runner.py``) with an
HTTP endpoint on a free port, for the cross-process tests.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized
from platform_streams.serde import String

RUNNER = Path(__file__).with_name("iq_runner.py")
STORE = "counts"


def count_app(source: str) -> StreamsBuilder:
    """``source`` (String keys) -> count per key in the store ``counts``."""
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_(STORE)
    )
    return builder


def http_get(url: str, token: str | None = None, timeout_s: float = 10.0) -> tuple[int, dict[str, Any], Any]:
    """``(status, headers, JSON body)`` of a GET; HTTP errors are returned, not raised."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return exc.code, dict(exc.headers or {}), json.loads(body) if body else None


class QueryProcess:
    """``iq_runner.py`` in a subprocess: prints ``HTTP <host:port>`` then ``RUNNING``."""

    def __init__(self, log_path: Path, **args: Any) -> None:
        argv = [sys.executable, str(RUNNER)]
        for name, value in args.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        self._log: IO[str] = log_path.open("a")
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=Path(__file__).parents[2]
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.address = ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.strip())
        self._lines.put("<EOF>")

    def wait_ready(self, timeout_s: float = 45.0) -> str:
        """Wait for the HTTP address and RUNNING; returns ``http://host:port``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"runner not RUNNING within {timeout_s}s") from None
            if line.startswith("HTTP "):
                self.address = line.split(" ", 1)[1]
            elif line == "RUNNING":
                return f"http://{self.address}"
            elif line == "<EOF>":
                raise AssertionError(f"runner exited ({self.proc.wait()}) before RUNNING")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
