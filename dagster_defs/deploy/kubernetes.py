"""Worker pods on Kubernetes: Helm values rendered from the spec, applied by a pluggable runner.

One Helm release of the repository's chart (``helm/platform-streams``: a StatefulSet with a
volume per pod, static membership, probes on the worker endpoint) per application. The
launcher renders the release's values from a :class:`DeploymentRequest` -- factory, settings,
replicas, the plugin's environment, the fingerprint as a pod annotation so that a new
fingerprint rolls the StatefulSet -- writes them to ``<root>/<app>/values.yaml`` and runs
``helm upgrade --install`` through a :class:`CommandRunner`. Secrets are never rendered:
the chart reads SASL credentials and the endpoint token from existing Secrets.

What is verified here: the rendered values (tests compare them to the chart's schema when
``helm``/``jsonschema`` are at hand) and the commands the launcher would run. What is NOT
verified on this machine: applying them to a cluster (there is none), pod readiness, and
``status``, which reads the StatefulSet with kubectl.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from dagster_defs.deploy.base import (
    DeploymentRecord,
    DeploymentRequest,
    DeploymentStatus,
    EnsureAction,
    EnsureResult,
    WorkerRecord,
)

__all__ = ["CommandRunner", "HelmLauncher", "SubprocessRunner"]

FINGERPRINT_ANNOTATION = "platform-streams.io/fingerprint"


class CommandRunner(Protocol):
    """Runs one command (helm, kubectl) and returns its standard output; raises on failure."""

    def __call__(self, command: Sequence[str]) -> str: ...


class SubprocessRunner:
    """The default runner: the real ``helm``/``kubectl`` on the PATH."""

    def __call__(self, command: Sequence[str]) -> str:
        done = subprocess.run(list(command), capture_output=True, text=True, check=False, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command[:3])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        return done.stdout


class HelmLauncher:
    """A :class:`~dagster_defs.deploy.base.WorkerLauncher` for one Helm release per app."""

    def __init__(
        self,
        root: str | Path,
        *,
        namespace: str = "default",
        chart: str = "helm/platform-streams",
        image: str = "platform-streams:latest",
        kube_context: str | None = None,
        dry_run: bool = False,
        runner: CommandRunner | None = None,
        auth_token: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.namespace = namespace
        self.chart = chart
        self.image = image
        self.kube_context = kube_context
        self.dry_run = dry_run
        self.runner: CommandRunner = runner or SubprocessRunner()
        self.auth_token = auth_token
        self.commands: list[list[str]] = []
        """Every command run (or, under dry_run, that would have been)."""

    def release(self, name: str) -> str:
        return name.replace("_", "-").lower()

    def render_values(self, request: DeploymentRequest) -> dict[str, Any]:
        """The chart values for ``request`` (no secrets: they come from existing Secrets)."""
        repository, _, tag = (
            self.image.rpartition(":") if ":" in self.image.split("/")[-1] else (self.image, "", "")
        )
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in request.settings.items()}
        settings.pop("state_dir", None)  # the chart mounts the volume there
        return {
            "replicaCount": request.workers,
            "image": {"repository": repository, "tag": tag},
            "app": {"factory": request.factory, "config": settings},
            "extraEnv": [{"name": k, "value": v} for k, v in sorted(request.env.items())],
            "podAnnotations": {FINGERPRINT_ANNOTATION: request.fingerprint},
        }

    def _scope(self, context_flag: str = "--kube-context") -> list[str]:
        context = [context_flag, self.kube_context] if self.kube_context else []
        return ["--namespace", self.namespace, *context]

    def _pods(self, name: str, replicas: int) -> list[WorkerRecord]:
        """The StatefulSet's pods, ``<release>-<ordinal>``, as worker records."""
        return [WorkerRecord(i, f"{self.release(name)}-{i}") for i in range(replicas)]

    def _run(self, command: list[str]) -> str:
        self.commands.append(command)
        return "" if self.dry_run else self.runner(command)

    def ensure(self, request: DeploymentRequest) -> EnsureResult:
        app_dir = self.root / request.name
        app_dir.mkdir(parents=True, exist_ok=True)
        values_path = app_dir / "values.yaml"
        previous = yaml.safe_load(values_path.read_text()) if values_path.exists() else None
        values = self.render_values(request)
        record = DeploymentRecord(request.name, request.fingerprint, request.connection, request.workers)
        record.workers = self._pods(request.name, request.workers)
        if previous == values:
            return EnsureResult("unchanged", record, "rendered values are unchanged")
        values_path.write_text(yaml.safe_dump(values, sort_keys=True))
        release = self.release(request.name)
        self._run(
            [
                "helm",
                "upgrade",
                "--install",
                release,
                self.chart,
                "--values",
                str(values_path),
                *self._scope(),
            ]
        )
        action: EnsureAction = "started"
        if previous is not None:
            action = "rolled" if _fingerprint(previous) != request.fingerprint else "scaled"
        return EnsureResult(action, record, "helm upgrade --install" + (" (dry run)" if self.dry_run else ""))

    def status(self, name: str) -> DeploymentStatus:
        """Ready replicas of the StatefulSet (kubectl); not verified without a cluster."""
        values_path = self.root / name / "values.yaml"
        if not values_path.exists():
            return DeploymentStatus(None)
        values = yaml.safe_load(values_path.read_text())
        replicas = int(values.get("replicaCount", 1))
        record = DeploymentRecord(name, _fingerprint(values) or "", "", replicas)
        record.workers = self._pods(name, replicas)
        if self.dry_run:
            return DeploymentStatus(record, alive=list(record.workers))
        out = self._run(
            ["kubectl", "get", "statefulset", self.release(name), "-o", "json", *self._scope("--context")]
        )
        ready = int(json.loads(out or "{}").get("status", {}).get("readyReplicas", 0) or 0)
        return DeploymentStatus(record, alive=record.workers[:ready], dead=record.workers[ready:])

    def stop(self, name: str) -> DeploymentStatus:
        self._run(["helm", "uninstall", self.release(name), *self._scope()])
        return DeploymentStatus(None)

    def scale(self, request: DeploymentRequest, workers: int) -> EnsureResult:
        return self.ensure(request.with_workers(workers))


def _fingerprint(values: dict[str, Any] | None) -> str | None:
    return ((values or {}).get("podAnnotations") or {}).get(FINGERPRINT_ANNOTATION)
