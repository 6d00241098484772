"""Worker pods on Kubernetes: Helm values rendered from the spec, applied by a pluggable runner.

One Helm release of the repository's chart (``helm/platform-streams``: a StatefulSet with a
volume per pod, static membership, probes on the worker endpoint) per application. The
launcher renders the release's values from a :class:`DeploymentRequest` -- factory, settings,
replicas, the plugin's environment, the fingerprint as a pod annotation so that a new
fingerprint rolls the StatefulSet -- writes them to ``<root>/<app>/values.yaml`` and runs
``helm upgrade --install`` through a :class:`CommandRunner`. Secrets are never rendered:
the chart reads SASL credentials and the endpoint token from existing Secrets.

Safe rollouts: a new fingerprint (a changed topology or app configuration) must never run
beside the old one -- a rolling update would put old and new members in one group, each
with its own idea of the tasks and internal topics. So a changed fingerprint is
stop-then-start: the StatefulSet is scaled to 0 (under KEDA: the ScaledObject is paused at
0 replicas), the launcher waits until every pod is gone, then upgrades; only an unchanged
fingerprint (replicas, resources) rolls pod by pod. Pod endpoints for the sensor and the
control jobs are the pods' stable names in the headless Service
(``<pod>.<release>-headless.<namespace>.svc.<cluster domain>``), so pause, resume and
status reach the pods from inside the cluster.

What is verified here: the rendered values (tests render them with the chart), the
commands the launcher would run and their order. What is NOT verified on this machine:
applying them to a cluster (there is none), pod readiness, and ``status``, which reads the
StatefulSet with kubectl.
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
#: KEDA holds a paused ScaledObject's target at this many replicas (KEDA 2.8+).
KEDA_PAUSED_ANNOTATION = "autoscaling.keda.sh/paused-replicas"


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
        extra_values: dict[str, Any] | None = None,
        http_port: int = 8080,
        cluster_domain: str = "cluster.local",
        stop_timeout_s: float = 300.0,
    ) -> None:
        self.root = Path(root)
        self.namespace = namespace
        self.chart = chart
        self.image = image
        self.kube_context = kube_context
        self.dry_run = dry_run
        self.runner: CommandRunner = runner or SubprocessRunner()
        self.auth_token = auth_token
        self.extra_values = extra_values or {}
        """Chart values merged into every release (e.g. ``autoscaling.keda``, ``zones``)."""
        self.http_port = http_port
        self.cluster_domain = cluster_domain
        self.stop_timeout_s = stop_timeout_s
        self.commands: list[list[str]] = []
        """Every command run (or, under dry_run, that would have been)."""

    @property
    def keda(self) -> bool:
        """KEDA owns the replica count (``autoscaling.keda.enabled`` in ``extra_values``)."""
        return bool(((self.extra_values.get("autoscaling") or {}).get("keda") or {}).get("enabled"))

    def release(self, name: str) -> str:
        return name.replace("_", "-").lower()

    def render_values(self, request: DeploymentRequest) -> dict[str, Any]:
        """The chart values for ``request`` (no secrets: they come from existing Secrets)."""
        repository, _, tag = (
            self.image.rpartition(":") if ":" in self.image.split("/")[-1] else (self.image, "", "")
        )
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in request.settings.items()}
        settings.pop("state_dir", None)  # the chart mounts the volume there
        values = {
            # the release's objects are named after it, so pods are <release>-<ordinal>
            "fullnameOverride": self.release(request.name),
            "replicaCount": request.workers,
            "image": {"repository": repository, "tag": tag},
            "app": {"factory": request.factory, "config": settings},
            "http": {"port": self.http_port},
            "queryRouting": {"clusterDomain": self.cluster_domain},
            "extraEnv": [{"name": k, "value": v} for k, v in sorted(request.env.items())],
            "podAnnotations": {FINGERPRINT_ANNOTATION: request.fingerprint},
        }
        return _merged(values, self.extra_values)

    def _scope(self, context_flag: str = "--kube-context") -> list[str]:
        context = [context_flag, self.kube_context] if self.kube_context else []
        return ["--namespace", self.namespace, *context]

    def _pods(self, name: str, replicas: int) -> list[WorkerRecord]:
        """The StatefulSet's pods, ``<release>-<ordinal>``, with their endpoints: the stable
        DNS names the chart's headless Service gives them."""
        release = self.release(name)
        domain = f"{release}-headless.{self.namespace}.svc.{self.cluster_domain}"
        return [
            WorkerRecord(i, f"{release}-{i}", endpoint=f"http://{release}-{i}.{domain}:{self.http_port}")
            for i in range(replicas)
        ]

    def _annotate_scaled_object(self, release: str, annotation: str) -> None:
        scope = self._scope("--context")
        self._run(["kubectl", "annotate", "scaledobject", release, annotation, "--overwrite", *scope])

    def _stop_pods(self, name: str) -> None:
        """Scale the release to 0 and wait until its last pod is gone (stop-then-start)."""
        release = self.release(name)
        if self.keda:  # KEDA would scale it back up: pause it at 0 instead
            self._annotate_scaled_object(release, f"{KEDA_PAUSED_ANNOTATION}=0")
        else:
            self._run(["kubectl", "scale", "statefulset", release, "--replicas=0", *self._scope("--context")])
        self._run(
            [
                "kubectl",
                "wait",
                "--for=delete",
                "pod",
                "--selector",
                f"app.kubernetes.io/instance={release}",
                f"--timeout={int(self.stop_timeout_s)}s",
                *self._scope("--context"),
            ]
        )

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
        rolled = previous is not None and _fingerprint(previous) != request.fingerprint
        if rolled:  # never old and new topology in one group: stop all, then start
            self._stop_pods(request.name)
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
        if rolled and self.keda:  # the upgrade keeps kubectl's annotation: lift the pause
            self._annotate_scaled_object(release, f"{KEDA_PAUSED_ANNOTATION}-")
        action: EnsureAction = "started"
        how = "helm upgrade --install"
        if previous is not None:
            action = "rolled" if rolled else "scaled"
            how = "stopped every pod, then helm upgrade" if rolled else "helm upgrade (rolling)"
        return EnsureResult(action, record, how + (" (dry run)" if self.dry_run else ""))

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
        """Set the replica count -- unless KEDA owns it: then nothing changes and the result
        says so (the chart omits ``replicas`` under KEDA; its min/max bound the size)."""
        if self.keda:
            record = DeploymentRecord(request.name, request.fingerprint, request.connection, request.workers)
            return EnsureResult(
                "unchanged",
                record,
                "KEDA scales this application on consumer lag (autoscaling.keda.enabled): "
                f"the request for {workers} workers is left to it",
            )
        return self.ensure(request.with_workers(workers))


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` key by key (as Helm merges values files)."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(out.get(key), dict) and isinstance(value, dict)
        out[key] = _merged(out[key], value) if both else value
    return out


def _fingerprint(values: dict[str, Any] | None) -> str | None:
    return ((values or {}).get("podAnnotations") or {}).get(FINGERPRINT_ANNOTATION)
