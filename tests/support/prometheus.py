"""A real Prometheus server for tests: started on a free port, scraping given targets.

Uses the ``prometheus`` binary of the Debian package (``.ci/run`` installs it), with a
generated scrape config, a temporary TSDB directory and a short scrape interval, so a test
can ask through the real HTTP API what a dashboard or an alert would see. Tests that need
it skip with a clear reason when the binary is missing (a developer machine without the
package); CI always has it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from platform_streams.dev.servers.processes import stop_process

__all__ = ["PrometheusServer", "prometheus_binary", "running_prometheus"]


def prometheus_binary() -> str:
    """Path of the ``prometheus`` binary, or skip the test (with how to get it)."""
    found = shutil.which("prometheus")
    if found is None:
        reason = "needs the prometheus binary (Debian package 'prometheus'; .ci/run installs it)"
        if os.environ.get("CI"):
            # CI installs it: a skip there would hide an unproven claim, so fail instead.
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    """HTTP API client of a running server (see :func:`running_prometheus`)."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def _get(self, path: str, params: Sequence[tuple[str, str]]) -> Any:
        target = f"{self.url}{path}?{urllib.parse.urlencode(list(params))}"
        try:
            with urllib.request.urlopen(target, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise AssertionError(f"Prometheus rejected {path} {params}: {exc.code} {detail}") from exc
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query: the result vector (or a scalar as a one-item list)."""
        data = self._get("/api/v1/query", [("query", expr)])
        result = data["result"]
        return (
            [{"metric": {}, "value": result}] if data["resultType"] in ("scalar", "string") else list(result)
        )

    def series(self, match: str, lookback_s: float = 300.0) -> list[dict[str, str]]:
        """Label sets of the series ``match`` selects (what Grafana's label_values() reads)."""
        now = time.time()
        params = [("match[]", match), ("start", str(now - lookback_s)), ("end", str(now))]
        return list(self._get("/api/v1/series", params))

    def alerts(self, state: str = "firing") -> list[dict[str, Any]]:
        """Alerts of the loaded rules in ``state`` (``pending`` or ``firing``)."""
        return [a for a in self._get("/api/v1/alerts", [])["alerts"] if a["state"] == state]

    def wait_for_alert(self, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Poll until alert ``name`` fires; its labels and annotations."""
        deadline = time.monotonic() + timeout_s
        while True:
            firing = [a for a in self.alerts() if a["labels"]["alertname"] == name]
            if firing:
                return firing[0]
            if time.monotonic() > deadline:
                pending = [a["labels"]["alertname"] for a in self.alerts("pending")]
                raise AssertionError(
                    f"alert {name} not firing after {timeout_s}s; firing: "
                    f"{[a['labels']['alertname'] for a in self.alerts()]}, pending: {pending}\n"
                    f"{self.log.read_text()[-2000:]}"
                )
            time.sleep(0.5)

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets", [])["activeTargets"])

    def wait_for(self, expr: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Poll ``expr`` until it returns a non-empty result (or fail with the server's log)."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no data for {expr!r} after {timeout_s}s; targets: {self.targets()}\n"
                    f"{self.log.read_text()[-2000:]}"
                )
            time.sleep(0.2)


@contextmanager
def running_prometheus(
    targets: Sequence[str],
    workdir: Path,
    *,
    scrape_interval: str = "1s",
    job: str = "platform-streams",
    bearer_token: str | None = None,
    rule_files: Sequence[Path] = (),
    target_labels: dict[str, str] | None = None,
) -> Iterator[PrometheusServer]:
    """Start Prometheus scraping ``targets`` (``host:port``); stop it (SIGTERM) on exit.

    ``rule_files`` are loaded and evaluated every scrape interval (alerts go to no
    Alertmanager: :meth:`PrometheusServer.alerts` reads their state); ``target_labels`` are
    added to every scraped series, as Kubernetes service discovery adds ``namespace``/``pod``."""
    binary = prometheus_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    scrape: dict[str, Any] = {
        "job_name": job,
        "metrics_path": "/metrics",
        "scrape_interval": scrape_interval,
        "scrape_timeout": scrape_interval,
        "static_configs": [{"targets": list(targets), "labels": dict(target_labels or {})}],
    }
    if bearer_token is not None:
        scrape["authorization"] = {"type": "Bearer", "credentials": bearer_token}
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [scrape],
    }
    if rule_files:
        config["rule_files"] = [str(path) for path in rule_files]
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    port = _free_port()
    log = workdir / "prometheus.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", log)
    try:
        _wait_ready(server, proc)
        yield server
    finally:
        stop_process(proc)


def _wait_ready(server: PrometheusServer, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"prometheus exited with {proc.returncode}:\n{server.log.read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"prometheus not ready after {timeout_s}s:\n{server.log.read_text()[-2000:]}")
