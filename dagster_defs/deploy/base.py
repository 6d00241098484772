"""What every deployment target shares: the request, the records, the launcher protocol.

A *deployment* is the set of long-running worker processes of one stream application.
Dagster runs are meant to finish, so the app asset does not run the application: it asks a
:class:`WorkerLauncher` to make the deployment match a :class:`DeploymentRequest` and
returns. The launcher decides what that takes (:class:`EnsureAction`): nothing when the
workers already run this fingerprint, a restart of all of them when the fingerprint
changed, starting or stopping some when only their number or health differs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol

__all__ = [
    "DeploymentRecord",
    "DeploymentRequest",
    "DeploymentStatus",
    "EnsureAction",
    "EnsureResult",
    "WorkerLauncher",
    "WorkerRecord",
]

EnsureAction = Literal["started", "rolled", "scaled", "repaired", "unchanged"]


@dataclass(frozen=True)
class DeploymentRequest:
    """The workers a stream application should have.

    ``factory`` is what ``platform-streams run`` takes (``module:factory``); for an app
    plugin it is ``platform_streams.apps:plugin_topology`` and ``env`` names the plugin and
    its configuration. ``settings`` are StreamsConfig settings without secrets;
    ``secret_env`` holds what must not be written to disk (client passwords, tokens).
    """

    name: str
    fingerprint: str
    factory: str
    settings: Mapping[str, Any]
    workers: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def connection(self) -> str:
        """What the workers connect to: a change restarts them like a new fingerprint."""
        return str(self.settings.get("bootstrap_servers", ""))

    def with_workers(self, workers: int) -> DeploymentRequest:
        """The same request for ``workers`` workers (an explicit scale)."""
        return replace(self, workers=workers)


@dataclass
class WorkerRecord:
    """One worker process (local) or pod (Kubernetes)."""

    index: int
    client_id: str
    endpoint: str | None = None
    pid: int | None = None
    state_dir: str | None = None
    log_path: str | None = None
    started_at: float = field(default_factory=time.time)


@dataclass
class DeploymentRecord:
    """What a launcher deployed for one application (persisted by the launcher)."""

    name: str
    fingerprint: str
    connection: str
    desired_workers: int
    workers: list[WorkerRecord] = field(default_factory=list)
    status: Literal["running", "stopped"] = "running"
    updated_at: float = field(default_factory=time.time)
    scaled_by_operator: bool = False
    """True after an explicit scale: re-materializing keeps that count instead of the spec's."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeploymentRecord:
        workers = [WorkerRecord(**w) for w in data.get("workers", [])]
        return cls(**{**data, "workers": workers})


@dataclass
class DeploymentStatus:
    """A deployment as found now: which recorded workers are alive."""

    record: DeploymentRecord | None
    alive: list[WorkerRecord] = field(default_factory=list)
    dead: list[WorkerRecord] = field(default_factory=list)

    @property
    def deployed(self) -> bool:
        return self.record is not None and self.record.status == "running"

    @property
    def healthy(self) -> bool:
        """Every desired worker is alive (says nothing about their Kafka Streams state)."""
        return (
            self.record is not None
            and self.deployed
            and not self.dead
            and len(self.alive) == self.record.desired_workers
        )

    @property
    def endpoints(self) -> list[str]:
        return [w.endpoint for w in self.alive if w.endpoint]


@dataclass
class EnsureResult:
    """What :meth:`WorkerLauncher.ensure` did, and the deployment afterwards."""

    action: EnsureAction
    record: DeploymentRecord
    reason: str = ""
    stopped: list[WorkerRecord] = field(default_factory=list)
    started: list[WorkerRecord] = field(default_factory=list)


class WorkerLauncher(Protocol):
    """A deployment target (see the module docstring)."""

    def ensure(self, request: DeploymentRequest) -> EnsureResult: ...

    def status(self, name: str) -> DeploymentStatus: ...

    def stop(self, name: str) -> DeploymentStatus: ...

    def scale(self, request: DeploymentRequest, workers: int) -> EnsureResult: ...
