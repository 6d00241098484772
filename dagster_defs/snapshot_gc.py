"""``<app>_prune_snapshots``: garbage-collect state snapshots, keeping the newest K per task.

The same operation as ``platform-streams snapshot prune`` (both call
:meth:`~platform_streams.state.snapshots.SnapshotCatalog.prune_store` and ``prune_orphans``,
which deletes killed jobs' unpublished uploads past a grace period); no Spark needed.
"""

from typing import Any

import dagster as dg
from pydantic import Field

from dagster_defs.resources import KafkaResource, StreamsDeploymentResource
from dagster_defs.spec import ResolvedStreamApp
from platform_streams.state.snapshots import ORPHAN_GRACE_S, SnapshotCatalog, open_snapshot_store

__all__ = ["PruneSnapshotsConfig", "prune_snapshots_job"]


class PruneSnapshotsConfig(dg.Config):
    """Which stores' snapshots to prune, and how many to keep per store partition."""

    keep: int = Field(default=3, ge=1, description="Snapshots kept per store partition (the newest).")
    stores: list[str] | None = Field(default=None, description="Only these stores (default: all).")
    orphan_grace_s: float = Field(
        default=ORPHAN_GRACE_S,
        ge=0,
        description="Also delete uploads no manifest publishes (killed jobs) once older than this.",
    )
    snapshots: str | None = Field(
        default=None, description="Snapshot location (default: state_snapshot_location)."
    )


def prune_snapshots_job(app: ResolvedStreamApp) -> dg.JobDefinition | None:
    if not app.stores:
        return None

    @dg.op(name=f"{app.name}_prune_snapshots_op")
    def prune(
        context: dg.OpExecutionContext,
        config: PruneSnapshotsConfig,
        kafka: KafkaResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> dict[str, Any]:
        streams = app.validated_settings(kafka.client_settings())
        location = (
            config.snapshots
            or streams.state_snapshot_location
            or str(streams_deployment.deploy_root.resolve() / app.name / "snapshots")
        )
        unknown = sorted(set(config.stores or ()) - set(app.stores))
        if unknown:
            raise dg.Failure(description=f"stores: {unknown} are not stores of {app.name} ({app.stores})")
        catalog = SnapshotCatalog(open_snapshot_store(location))
        deleted = {
            store: catalog.prune_store(app.application_id, store, config.keep)
            for store in (config.stores or app.stores)
        }
        orphans = [
            prefix
            for store in (config.stores or app.stores)
            for prefix in catalog.prune_orphans(app.application_id, store, config.orphan_grace_s)
        ]
        total = sum(n for per in deleted.values() for n in per.values())
        context.log.info(
            f"pruned {total} snapshots at {location}, keeping {config.keep} per partition, "
            f"and {len(orphans)} unpublished uploads"
        )
        data = {
            "location": location,
            "keep": config.keep,
            "deleted": total,
            "by_store": deleted,
            "orphans": orphans,
        }
        context.add_output_metadata(
            {"deleted": total, "by_store": dg.MetadataValue.json(deleted), "orphans": len(orphans)}
        )
        return data

    @dg.job(
        name=f"{app.name}_prune_snapshots",
        description="Delete all but the newest K state snapshots of every store partition.",
    )
    def job() -> None:
        prune()

    return job
