"""Deployment targets of stream application workers: local processes, Kubernetes (Helm)."""

from dagster_defs.deploy.base import (
    DeploymentRecord,
    DeploymentRequest,
    DeploymentStatus,
    EnsureResult,
    WorkerLauncher,
    WorkerRecord,
)
from dagster_defs.deploy.kubernetes import HelmLauncher
from dagster_defs.deploy.local import LaunchError, LocalProcessLauncher
from dagster_defs.deploy.worker_client import WorkerClient

__all__ = [
    "DeploymentRecord",
    "DeploymentRequest",
    "DeploymentStatus",
    "EnsureResult",
    "HelmLauncher",
    "LaunchError",
    "LocalProcessLauncher",
    "WorkerClient",
    "WorkerLauncher",
    "WorkerRecord",
]
