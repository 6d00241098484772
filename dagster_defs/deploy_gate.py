"""The deploy gate in Dagster: an asset check on the app asset, and a refusal in its materialization.

Both compare the code location's topology (the candidate) with the one the running
application recorded on its control topic (:mod:`platform_streams.ops.deployed_topology`),
classified by :mod:`platform_streams.ops.topology_diff`:

* the ``deploy_gate`` **asset check** fails (severity ERROR) while the candidate is
  incompatible with what runs, naming each store and topic and the fix -- visible before
  anyone materializes;
* the **materialization** runs the same gate before it touches a worker and fails on an
  incompatible change, unless its run config says ``allow_incompatible: true``
  (:class:`DeployGateConfig`); a change that needs a reset of named stores is deployed, with
  the stores in the materialization's metadata.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from dagster_defs.resources import KafkaResource
from dagster_defs.spec import ResolvedStreamApp
from platform_streams.ops.deployed_topology import DeployedTopology, gate_topology
from platform_streams.ops.topology_diff import Change, TopologyDiff

__all__ = ["CHECK_NAME", "DeployGateConfig", "deploy_gate_check", "gate_metadata", "run_deploy_gate"]

CHECK_NAME = "deploy_gate"


class DeployGateConfig(dg.Config):
    """Run config of the app asset's materialization."""

    allow_incompatible: bool = False
    """Deploy even when the change orphans or misreads state (the gate's findings are logged)."""


def _gate(app: ResolvedStreamApp, kafka: KafkaResource) -> tuple[TopologyDiff, DeployedTopology]:
    conf = kafka.client_conf()  # with the credentials: the gate reads the control topic
    bootstrap = conf.pop("bootstrap.servers")
    config = app.validated_settings(
        {"bootstrap_servers": bootstrap, **({"client_config": conf} if conf else {})}
    )
    return gate_topology(app.topology, config)


def gate_metadata(diff: TopologyDiff, deployed: DeployedTopology) -> dict[str, Any]:
    return {
        "change": diff.change.value,
        "deployed_from": deployed.source,
        "deployed_fingerprint": diff.deployed_fingerprint or "",
        "candidate_fingerprint": diff.candidate_fingerprint,
        "affected": dg.MetadataValue.json(
            [f.subject for f in diff.findings if f.change is not Change.COMPATIBLE]
        ),
        "findings": dg.MetadataValue.md("\n".join(f"* {f.line()}" for f in diff.findings) or "none"),
    }


def run_deploy_gate(
    app: ResolvedStreamApp, kafka: KafkaResource, allow_incompatible: bool, log: Any
) -> dict[str, Any]:
    """The gate before a deployment: raises :class:`dagster.Failure` on a refused change."""
    diff, deployed = _gate(app, kafka)
    for line in diff.lines():
        log.info(f"{app.name} deploy gate: {line}")
    metadata = gate_metadata(diff, deployed)
    if diff.change is Change.INCOMPATIBLE and not allow_incompatible:
        raise dg.Failure(
            description=f"{app.name}: deploy refused by the deploy gate -- {diff.summary()}. "
            + " ".join(f.line() for f in diff.findings if f.change is Change.INCOMPATIBLE)
            + " To deploy anyway, materialize with run config allow_incompatible: true.",
            metadata=metadata,
        )
    if diff.change is Change.INCOMPATIBLE:
        log.warning(f"{app.name}: incompatible change deployed (allow_incompatible): {diff.summary()}")
    return metadata


def deploy_gate_check(app: ResolvedStreamApp, key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=key,
        name=CHECK_NAME,
        description="The code location's topology against the one the running application recorded: "
        "fails when deploying it would orphan or misread state (store, changelog, repartition, serde, "
        "co-partitioning), naming each store and topic and the fix.",
    )
    def _check(kafka: KafkaResource) -> dg.AssetCheckResult:
        diff, deployed = _gate(app, kafka)
        return dg.AssetCheckResult(
            passed=diff.change is not Change.INCOMPATIBLE,
            description=diff.summary(),
            metadata=gate_metadata(diff, deployed),
            severity=dg.AssetCheckSeverity.ERROR,
        )

    return _check
