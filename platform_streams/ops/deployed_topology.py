"""Where the deploy gate reads "deployed" from: the manifest the running application wrote.

Every client of an application writes the manifest of the topology it runs
(:func:`platform_streams.topology.manifest.topology_manifest`) to the application's control
topic ``<application_id>-control`` under the key ``topology`` when it starts, next to
its heartbeats. That is the most honest source of "deployed" there is:

* it is written by the process that runs the topology, from the topology it runs -- not by
  a deploy tool that meant to deploy it (a Dagster deployment record or the StatefulSet's
  fingerprint annotation say what was asked for, and hold only a hash, which cannot say
  *which* store changed);
* it lives on the broker beside the state it describes: the reset job deletes the control
  topic with the changelogs, so after a reset there is no manifest, and no state to lose.

The last manifest written wins (the topic is compacted): during a rolling update of an
unchanged topology all clients write the same one. Clients that ran before manifests
existed wrote none; the gate then falls back to the state itself: the application's
changelog topics on the broker, each of which the candidate must still write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsError
from platform_streams.kafka import OFFSET_BEGINNING, KafkaAdmin, read_partition_range
from platform_streams.ops.topology_diff import TopologyDiff, diff_manifests, diff_unrecorded
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.topology.manifest import MANIFEST_VERSION, TOPOLOGY_KEY, topology_manifest
from platform_streams.topology.topology import Topology

__all__ = ["DeployedTopology", "gate_topology", "read_deployed_topology"]


@dataclass(frozen=True)
class DeployedTopology:
    """The deployed manifest (None: none recorded) and where it was read."""

    manifest: dict[str, Any] | None
    source: str
    #: without a manifest: the application's changelog topics found on the broker
    changelogs: tuple[str, ...] = ()


def read_deployed_topology(config: StreamsConfig, timeout_s: float = 30.0) -> DeployedTopology:
    """The last ``topology`` record of the application's control topic (read to its end)."""
    topic = control_topic_name(config.application_id)
    with KafkaAdmin(config.admin_configs()) as admin:
        exists = topic in admin.list_topics()
    if not exists:
        return DeployedTopology(None, f"no control topic {topic} (never started, or reset since)")
    conf = {**config.restore_consumer_configs(), "isolation.level": "read_uncommitted"}
    last: tuple[bytes | None, int] | None = None
    for msg in read_partition_range(conf, topic, 0, OFFSET_BEGINNING, timeout_s=timeout_s):
        if msg.key() == TOPOLOGY_KEY.encode():
            last = (msg.value(), msg.timestamp()[1])
    if last is None or last[0] is None:
        return DeployedTopology(
            None,
            f"no topology recorded on {topic} (its clients predate the record); judged by the "
            "application's changelog topics on the broker",
            tuple(_changelogs(config)),
        )
    value, written_ms = last
    try:
        manifest = json.loads(value)  # type: ignore[arg-type]
    except ValueError as exc:
        raise StreamsError(f"the topology record on {topic} is not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
        version = manifest.get("version") if isinstance(manifest, dict) else "?"
        raise StreamsError(
            f"the topology record on {topic} has version {version}; this gate reads {MANIFEST_VERSION}"
        )
    when = datetime.fromtimestamp(written_ms / 1000, UTC).isoformat(timespec="seconds")
    by = manifest.get("process", "?")
    return DeployedTopology(manifest, f"the topology record on {topic}, written by client {by} at {when}")


def _changelogs(config: StreamsConfig) -> list[str]:
    prefix = f"{config.application_id}-"
    with KafkaAdmin(config.admin_configs()) as admin:
        return sorted(t for t in admin.list_topics() if t.startswith(prefix) and t.endswith("-changelog"))


def gate_topology(
    topology: Topology, config: StreamsConfig, *, deployed: DeployedTopology | None = None
) -> tuple[TopologyDiff, DeployedTopology]:
    """Compare ``topology`` with what is deployed for ``config.application_id``."""
    found = deployed if deployed is not None else read_deployed_topology(config)
    candidate = topology_manifest(topology)
    if found.manifest is None and found.changelogs:
        return diff_unrecorded(found.changelogs, candidate, config.application_id), found
    return diff_manifests(found.manifest, candidate, config.application_id), found
