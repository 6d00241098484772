"""Helpers of the interactive-query and metrics suites: the count app, HTTP calls, runner processes.

The app counts records per String key into the store ``counts`` (the KTable behind
``group_by_key().count()``), so expected values are easy to compute from what a test
produced. :class:`QueryProcess` runs it in its own OS process (``iq_runner.py``) with an
HTTP endpoint on a free port, for the cross-process tests.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from platform_streams import KafkaStreams, StreamsBuilder
from platform_streams.dsl import Consumed, Materialized
from platform_streams.query import RangeQuery, StateQueryRequest
from platform_streams.serde import String
from tests.integration.support_apps import RunnerProcess

RUNNER = Path(__file__).with_name("iq_runner.py")
STORE = "counts"


def count_app(source: str) -> StreamsBuilder:
    """``source`` (String keys) -> count per key in the store ``counts``."""
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_(STORE)
    )
    return builder


def scan_rows(streams: KafkaStreams, store: str = STORE) -> dict[str, Any]:
    """Every row of ``store`` over the client's partitions that answered (an unbounded range query)."""
    result = streams.query(StateQueryRequest.in_store(store).with_query(RangeQuery.with_no_bounds()))
    rows: dict[str, Any] = {}
    for answer in result.partition_results.values():
        if answer.is_success():
            rows.update(answer.result)
    return rows


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


class QueryProcess(RunnerProcess):
    """``iq_runner.py`` in a subprocess: prints ``HTTP <host:port>`` then ``RUNNING``."""

    runner = RUNNER
    stop_timeout_s = 30.0

    def __init__(self, log_path: Path, **args: Any) -> None:
        super().__init__(log_path, **args)
        self.address = ""

    def wait_ready(self, timeout_s: float = 45.0) -> str:
        """Wait for the HTTP address and RUNNING; returns ``http://host:port``."""

        def running(line: str) -> bool:
            if line.startswith("HTTP "):
                self.address = line.split(" ", 1)[1]
            return line == "RUNNING"

        self.wait_for_line(running, "RUNNING", timeout_s)
        return f"http://{self.address}"

    def close(self) -> None:
        """SIGTERM first (the client removes itself from the metadata topic), SIGKILL if it hangs."""
        if self.proc.poll() is None:
            try:
                self.terminate()
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
