"""Shadow replay in Dagster: the ``<app>/shadow_replay`` asset, its check and its job.

Materializing the asset (job ``<app>_shadow_replay``) runs a candidate topology through the
Spark backfill over a range of the app's real input (by default the last hour), writes its
output as Parquet under the deployment root, and diffs it with the baseline
(:mod:`platform_streams.ops.spark.shadow_replay`: the deployed topology replayed over the same
offsets, or what the live app wrote). The materialization carries the summary as metadata;
the asset check ``shadow_replay_matches`` passes when the outputs are identical.

The candidate is a ``module:factory`` or, for a plugin app, the code location's plugin with
some of its configuration changed (``candidate_app_config``, merged over the app's). The
"deployed" side is the code location's topology of the app, which the app asset deploys.
"""

from collections.abc import Iterator
from typing import Any, Literal

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from pydantic import Field

from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource
from dagster_defs.spec import PluginFactory, ResolvedStreamApp
from dagster_defs.translator import safe_name
from platform_streams.errors import StreamsConfigError
from platform_streams.ops.shadow_commands import input_range, shadow_dir

__all__ = ["CHECK_NAME", "ShadowReplayConfig", "shadow_replay_asset_key", "shadow_replay_defs"]

CHECK_NAME = "shadow_replay_matches"


class ShadowReplayConfig(dg.Config):
    """``platform-streams shadow-replay``: which candidate, over which input, against what."""

    candidate_topology: str | None = Field(
        default=None, description="The candidate as 'module:factory' (else the app's plugin, below)."
    )
    candidate_app_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Plugin apps: the candidate is the plugin with these config fields changed.",
    )
    last: str | None = Field(
        default="PT1H", description="The input of this last duration (ISO 8601); null to use start/end."
    )
    start: str | None = Field(
        default=None, description="earliest, an ISO time or epoch ms (with last: null)."
    )
    end: str | None = Field(default=None, description="latest, an ISO time or epoch ms, exclusive.")
    baseline: Literal["replay", "live"] = Field(
        default="replay",
        description="replay: the deployed topology over the same input; live: what the app wrote.",
    )
    path: str | None = Field(default=None, description="Shadow output directory (default: deployment root).")
    show: int = Field(default=20, ge=0, description="How many differing keys and records to report.")


def shadow_replay_asset_key(app: ResolvedStreamApp) -> dg.AssetKey:
    return dg.AssetKey([safe_name(app.name), "shadow_replay"])


def _candidate(app: ResolvedStreamApp, config: ShadowReplayConfig) -> Any:
    if config.candidate_topology is not None:
        if config.candidate_app_config:
            raise dg.Failure(description="candidate_app_config: not with candidate_topology")
        return config.candidate_topology
    if app.plugin is None:
        raise dg.Failure(description="candidate_topology: required ('module:factory') for a non-plugin app")
    merged = {**app.app_config, **config.candidate_app_config}
    try:
        app.plugin.validate_config(merged)
    except StreamsConfigError as exc:
        raise dg.Failure(description=f"candidate_app_config: {exc}") from exc
    return PluginFactory(app.plugin.name, merged)


def shadow_replay_defs(
    app: ResolvedStreamApp, app_key: dg.AssetKey
) -> tuple[dg.AssetsDefinition, UnresolvedAssetJobDefinition]:
    """The shadow replay asset (with its check) downstream of the app asset, and its job."""
    key = shadow_replay_asset_key(app)
    spec = dg.AssetSpec(
        key,
        deps=[app_key],
        group_name=safe_name(app.spec.group or app.name),
        kinds={"spark", "parquet"},
        description=f"A candidate topology of {app.application_id!r} replayed on Spark over its real "
        "input and diffed with the deployed one's output (run the job with the candidate).",
    )
    check = dg.AssetCheckSpec(
        CHECK_NAME,
        asset=key,
        description="The candidate's output over the input range equals the baseline's.",
    )

    @dg.multi_asset(specs=[spec], check_specs=[check], name=f"{app.name}_shadow_replay_asset")
    def shadow(
        context: dg.AssetExecutionContext,
        config: ShadowReplayConfig,
        kafka: KafkaResource,
        spark: SparkResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        from platform_streams.ops.spark.shadow_replay import shadow_replay  # pyspark only here

        try:
            start, end = input_range(config.start, config.end, config.last)
        except StreamsConfigError as exc:
            raise dg.Failure(description=str(exc)) from exc
        candidate = _candidate(app, config)
        streams = app.validated_settings(kafka.client_settings())
        root = config.path or str(streams_deployment.deploy_root.resolve() / app.name / "shadow")
        location = shadow_dir(root, app.application_id)
        result = shadow_replay(
            spark.session(),
            app.spark_app,
            candidate,
            streams,
            location,
            start=start,
            end=end,
            baseline=config.baseline,
            show=config.show,
        )
        context.log.info(result.summary())
        d = result.diff
        keys = [{"topic": k.topic, "key": k.key, "candidate": k.candidate, "baseline": k.baseline}
                for k in d.differing_keys]  # fmt: skip
        metadata: dict[str, Any] = {
            "verdict": result.verdict(),
            "baseline": result.baseline,
            "input_records": result.input_records,
            "keys_compared": d.keys_compared,
            "differing_keys": d.differing_key_count,
            "differing_records": d.differing_record_count,
            "first_differing_keys": dg.MetadataValue.json(keys),
            "summary": dg.MetadataValue.md(f"```\n{result.summary()}\n```"),
        }
        yield dg.MaterializeResult(
            asset_key=key,
            metadata={
                **metadata,
                "shadow_output": dg.MetadataValue.path(str(location)),
                "result": dg.MetadataValue.json(result.to_dict()),
            },
        )
        yield dg.AssetCheckResult(
            asset_key=key,
            check_name=CHECK_NAME,
            passed=result.passed,
            description=result.verdict(),
            metadata=metadata,
        )

    job = dg.define_asset_job(
        f"{app.name}_shadow_replay",
        selection=dg.AssetSelection.assets(key),
        description="Spark: replay a candidate topology over the real input and diff its output.",
    )
    return shadow, job
