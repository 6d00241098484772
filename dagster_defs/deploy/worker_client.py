"""A small client for a worker's HTTP endpoint (platform_streams.server): health, state,
metrics and Connect-style control.

The standard library only (``urllib``): the sensor polls a few endpoints every 30 seconds,
which needs no connection pool, and the code location must not add dependencies the
platform_streams workers do not have.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerClient", "WorkerUnreachableError", "parse_prometheus_totals"]


class WorkerUnreachableError(Exception):
    """The endpoint did not answer (connection refused, timeout) or answered garbage."""


@dataclass(frozen=True)
class WorkerClient:
    """Talks to one worker endpoint, ``http://host:port``."""

    endpoint: str
    token: str | None = None
    timeout_s: float = 5.0

    def _request(self, method: str, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(self.endpoint.rstrip("/") + path, method=method)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if method in ("PUT", "POST"):
            request.data = b""
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            raise WorkerUnreachableError(f"{self.endpoint}{path}: {exc}") from exc

    def _json(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
        status, body = self._request(method, path)
        try:
            document = json.loads(body or b"{}")
        except ValueError as exc:
            raise WorkerUnreachableError(f"{self.endpoint}{path}: not JSON ({status})") from exc
        return status, document if isinstance(document, dict) else {"value": document}

    def ready(self) -> bool:
        """``/health/ready``: RUNNING and nothing restoring."""
        try:
            return self._request("GET", "/health/ready")[0] == 200
        except WorkerUnreachableError:
            return False

    def state(self) -> dict[str, Any]:
        """``/state``: lifecycle state, workers, tasks, lag."""
        status, document = self._json("GET", "/state")
        if status != 200:
            raise WorkerUnreachableError(f"{self.endpoint}/state answered {status}: {document}")
        return document

    def metrics_text(self) -> str:
        status, body = self._request("GET", "/metrics")
        if status != 200:
            raise WorkerUnreachableError(f"{self.endpoint}/metrics answered {status}")
        return body.decode()

    def control(self, action: str) -> tuple[int, dict[str, Any]]:
        """``status`` (GET), ``pause``/``resume`` (PUT), ``restart`` (POST)."""
        method = {"status": "GET", "restart": "POST"}.get(action, "PUT")
        return self._json(method, f"/control/{action}")


def parse_prometheus_totals(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Sum every sample of each metric in ``names`` (all label sets) from Prometheus text."""
    totals = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        metric = line.split("{", 1)[0].split(" ", 1)[0]
        if metric in totals:
            try:
                totals[metric] += float(line.rsplit(" ", 1)[-1])
            except ValueError:
                continue
    return totals
