"""Operations jobs of one stream application, with typed run config mirroring the CLI.

=================================  ===============================================
job                                CLI equivalent
=================================  ===============================================
``<app>_internal_topics``          ``platform-streams topics plan|create|validate|delete``
``<app>_reset``                    ``platform-streams reset`` (dry run by default)
``<app>_compact_store``            the Spark changelog compaction of one store
``<app>_backfill``                 the Spark backfill, one run per time partition
``<app>_workers``                  stop / scale / pause / resume / restart / status
``<app>_dlq_replay``               ``platform-streams dlq replay`` (dry run by default)
``<app>_prune_snapshots``          ``platform-streams snapshot prune --keep K``
=================================  ===============================================

A wrong run config value is refused by Dagster before the run starts, naming the field
(``Literal`` and ``Enum`` fields: the store must be one of the app's stores). An operation
that refuses (an active group, foreign topics) fails the run with the operation's own
summary; every result is attached to the run as JSON metadata.
"""

import enum
from typing import Any, Literal

import dagster as dg
from pydantic import Field, create_model

from dagster_defs.dead_letter_replay import dlq_replay_job
from dagster_defs.deploy.local import LocalProcessLauncher
from dagster_defs.deploy.worker_client import WorkerClient, WorkerUnreachableError
from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource
from dagster_defs.snapshot_gc import prune_snapshots_job
from dagster_defs.spec import ResolvedStreamApp
from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.ops import (
    OffsetScenario,
    OperationRefusedError,
    OpsResult,
    ResetOptions,
    create_internal_topics,
    delete_internal_topics,
    plan_internal_topics,
    reset_application,
    validate_internal_topics,
)

__all__ = ["BackfillJobConfig", "InternalTopicsConfig", "ResetJobConfig", "WorkersJobConfig", "build_jobs"]


class InternalTopicsConfig(dg.Config):
    """``platform-streams topics ACTION``."""

    action: Literal["plan", "create", "validate", "delete"] = Field(default="plan", description="What to do.")
    dry_run: bool = Field(
        default=False, description="create/delete: report what would be done, change nothing."
    )
    topics: list[str] | None = Field(
        default=None, description="delete: only these topics (must be the app's)."
    )
    include_orphans: bool = Field(
        default=False, description="delete: also <app id>-*-repartition/-changelog orphans."
    )
    yes: bool = Field(default=False, description="delete: required to really delete (the CLI's --yes).")


class ResetJobConfig(dg.Config):
    """``platform-streams reset``: reprocess the input from a chosen position with empty state."""

    scenario: Literal["to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime", "by-duration"] = (
        "to-earliest"
    )
    offset: int | None = Field(
        default=None, description="to-offset: the offset; shift-by: the shift (may be < 0)."
    )
    datetime: str | None = Field(default=None, description="to-datetime: e.g. 2024-05-01T12:00:00.000Z.")
    duration: str | None = Field(default=None, description="by-duration: e.g. PT1H.")
    input_topics: list[str] | None = Field(default=None, description="Default: every source topic.")
    dry_run: bool = Field(default=True, description="Report every action, change nothing (the default).")
    force: bool = Field(default=False, description="Expire left-over members of stopped instances first.")
    include_orphans: bool = False
    keep_local_state: bool = Field(default=False, description="Do not wipe the workers' local state.")
    stop_workers: bool = Field(
        default=False, description="Stop the deployed workers first (a reset refuses while they run)."
    )


class BackfillJobConfig(dg.Config):
    """The Spark backfill of one time partition (the partition is the input time window)."""

    output: Literal["parquet", "kafka"] = Field(default="parquet", description="Where the output records go.")
    path: str | None = Field(
        default=None, description="parquet: directory (default under the deployment root)."
    )


class WorkersJobConfig(dg.Config):
    """Lifecycle of the deployed workers."""

    action: Literal["status", "stop", "scale", "pause", "resume", "restart"] = "status"
    workers: int | None = Field(default=None, ge=1, description="scale: the new number of workers.")


def _config(app: ResolvedStreamApp, kafka: KafkaResource) -> StreamsConfig:
    return app.validated_settings(kafka.client_settings())


def _finish(context: dg.OpExecutionContext, result: OpsResult) -> dict[str, Any]:
    data = result.to_dict()
    context.log.info(result.summary())
    context.add_output_metadata({"result": dg.MetadataValue.json(data), "summary": dg.MetadataValue.md(
        f"```\n{result.summary()}\n```")})  # fmt: skip
    if not result.ok:
        raise dg.Failure(description=result.summary(), metadata={"result": dg.MetadataValue.json(data)})
    return data


def _refused(exc: OperationRefusedError) -> dg.Failure:
    return dg.Failure(
        description=f"{exc}\n\n{exc.result.summary()}",
        metadata={"result": dg.MetadataValue.json(exc.result.to_dict())},
    )


def _one_op_job(op: dg.OpDefinition, name: str, description: str, **options: Any) -> dg.JobDefinition:
    """A job that runs ``op`` alone (every operations job is one op)."""

    @dg.job(name=name, description=description, **options)
    def job() -> None:
        op()

    return job


def _scenario(config: ResetJobConfig) -> OffsetScenario:
    needs = {
        "to-offset": "offset",
        "shift-by": "offset",
        "to-datetime": "datetime",
        "by-duration": "duration",
    }
    field = needs.get(config.scenario)
    if field is not None and getattr(config, field) is None:
        raise dg.Failure(description=f"{field}: required for scenario {config.scenario}")
    try:
        if config.scenario == "to-latest":
            return OffsetScenario.to_latest()
        if config.scenario == "to-offset":
            return OffsetScenario.to_offset(int(config.offset or 0))
        if config.scenario == "shift-by":
            return OffsetScenario.shift_by(int(config.offset or 0))
        if config.scenario == "to-datetime":
            return OffsetScenario.to_datetime(str(config.datetime))
        if config.scenario == "by-duration":
            return OffsetScenario.by_duration(str(config.duration))
    except StreamsConfigError as exc:
        raise dg.Failure(description=f"{field}: {exc}") from exc
    return OffsetScenario.to_earliest()


def _topics_job(app: ResolvedStreamApp) -> dg.JobDefinition:
    @dg.op(name=f"{app.name}_internal_topics_op")
    def internal_topics(
        context: dg.OpExecutionContext, config: InternalTopicsConfig, kafka: KafkaResource
    ) -> dict[str, Any]:
        streams = _config(app, kafka)
        try:
            if config.action == "plan":
                result = plan_internal_topics(app.topology, streams)
            elif config.action == "validate":
                result = validate_internal_topics(app.topology, streams)
            elif config.action == "create":
                result = create_internal_topics(app.topology, streams, dry_run=config.dry_run)
            else:
                if not config.yes and not config.dry_run:
                    raise dg.Failure(description="yes: must be true to delete topics (or set dry_run: true)")
                result = delete_internal_topics(
                    app.topology,
                    streams,
                    topics=config.topics,
                    include_orphans=config.include_orphans,
                    dry_run=config.dry_run,
                )
        except OperationRefusedError as exc:
            raise _refused(exc) from exc
        return _finish(context, result)

    return _one_op_job(
        internal_topics, f"{app.name}_internal_topics", "Plan, create, validate or delete internal topics."
    )


def _reset_job(app: ResolvedStreamApp) -> dg.JobDefinition:
    @dg.op(name=f"{app.name}_reset_op")
    def reset(
        context: dg.OpExecutionContext,
        config: ResetJobConfig,
        kafka: KafkaResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> dict[str, Any]:
        streams = _config(app, kafka)
        launcher = streams_deployment.launcher()
        if config.stop_workers and not config.dry_run:
            launcher.stop(app.name)
            context.log.info(f"stopped the workers of {app.name}")
        options = ResetOptions(
            scenario=_scenario(config),
            input_topics=config.input_topics,
            dry_run=config.dry_run,
            force=config.force,
            include_orphans=config.include_orphans,
            wipe_local_state=not config.keep_local_state,
        )
        try:
            result = reset_application(app.topology, streams, options)
        except OperationRefusedError as exc:
            raise _refused(exc) from exc
        data = _finish(context, result)
        if not config.dry_run and not config.keep_local_state and isinstance(launcher, LocalProcessLauncher):
            wiped = launcher.wipe_local_state(app.name)
            context.log.info(f"wiped the local state of the workers: {wiped or 'nothing there'}")
        return data

    return _one_op_job(reset, f"{app.name}_reset", "Reset the application (dry run unless dry_run: false).")


def _compaction_job(app: ResolvedStreamApp) -> dg.JobDefinition | None:
    if not app.stores:
        return None
    stores = enum.Enum(f"{app.name}_store", {s: s for s in app.stores})  # type: ignore[misc]
    config_cls: Any = create_model(
        f"{app.name}_CompactionConfig",
        __base__=dg.Config,
        __doc__="Compact one store's changelog into snapshots the workers restore from.",
        store=(
            stores,
            Field(default=stores(app.stores[0]), description="The store whose changelog is compacted."),
        ),
        snapshots=(
            str | None,
            Field(default=None, description="Snapshot location (default: state_snapshot_location)."),
        ),
        keep=(int | None, Field(default=None, ge=1, description="Prune older snapshots of each partition.")),
        parquet=(bool, Field(default=True, description="Also write a Parquet copy for analysts.")),
    )

    @dg.op(name=f"{app.name}_compact_store_op")
    def compact(
        context: dg.OpExecutionContext,
        config: config_cls,
        kafka: KafkaResource,
        spark: SparkResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> dict[str, Any]:
        from platform_streams.ops.spark.compaction import compact_changelog

        streams = _config(app, kafka)
        store = config.store.value
        location = (
            config.snapshots
            or streams.state_snapshot_location
            or str(streams_deployment.deploy_root.resolve() / app.name / "snapshots")
        )
        result = compact_changelog(
            spark.session(),
            streams.restore_consumer_configs(),
            app.application_id,
            store,
            location,
            keep=config.keep,
            parquet=config.parquet,
        )
        context.log.info(result.summary())
        data = {
            "changelog_topic": result.changelog_topic,
            "offsets_read": result.offsets_read,
            "snapshots": len(result.manifests),
            "live_keys": sum(m.record_count for m in result.manifests),
            "parquet": result.parquet_uri,
            "location": location,
        }
        context.add_output_metadata({k: v for k, v in data.items() if v is not None})
        return data

    return _one_op_job(
        compact, f"{app.name}_compact_store", "Spark: compact a store's changelog into snapshots."
    )


def _partitions(app: ResolvedStreamApp) -> dg.PartitionsDefinition:
    if app.spec.backfill.granularity == "hourly":
        return dg.HourlyPartitionsDefinition(start_date=f"{app.spec.backfill.start}-00:00")
    return dg.DailyPartitionsDefinition(start_date=app.spec.backfill.start)


def _backfill_job(app: ResolvedStreamApp) -> dg.JobDefinition:
    @dg.op(name=f"{app.name}_backfill_op")
    def backfill_window(
        context: dg.OpExecutionContext,
        config: BackfillJobConfig,
        kafka: KafkaResource,
        spark: SparkResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> dict[str, Any]:
        from platform_streams.ops.spark.backfill import KafkaInput, KafkaOutput, ParquetOutput, backfill

        window = context.partition_time_window
        start_ms, end_ms = int(window.start.timestamp() * 1000), int(window.end.timestamp() * 1000)
        root = streams_deployment.deploy_root.resolve() / app.name / "backfill"
        output: ParquetOutput | KafkaOutput = (
            KafkaOutput()
            if config.output == "kafka"
            else ParquetOutput(config.path or str(root / context.partition_key.replace(":", "")))
        )
        result = backfill(
            spark.session(),
            app.spark_app,
            _config(app, kafka),
            [KafkaInput(start=start_ms, end=end_ms)],
            output,
        )
        context.log.info(result.summary())
        data = {"window": [start_ms, end_ms], "records_out": result.records_out, "output": result.output}
        context.add_output_metadata({"result": dg.MetadataValue.json(data)})
        return data

    return _one_op_job(
        backfill_window,
        f"{app.name}_backfill",
        "Spark: run the topology over one time window of the input (launch backfills in the UI).",
        partitions_def=_partitions(app),
    )


def _workers_job(app: ResolvedStreamApp) -> dg.JobDefinition:
    @dg.op(name=f"{app.name}_workers_op")
    def workers(
        context: dg.OpExecutionContext,
        config: WorkersJobConfig,
        kafka: KafkaResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> dict[str, Any]:
        launcher = streams_deployment.launcher()
        if config.action == "stop":
            status = launcher.stop(app.name)
        elif config.action == "scale":
            if config.workers is None:
                raise dg.Failure(description="workers: required for action scale")
            request = app.deployment_request(kafka.connection_settings(), kafka.secret_env())
            scaled = launcher.scale(request, config.workers)
            context.log.info(f"{app.name} scale: {scaled.action} ({scaled.reason})")
            status = launcher.status(app.name)
        else:
            status = launcher.status(app.name)
        answers: dict[str, Any] = {}
        if config.action in ("status", "pause", "resume", "restart"):
            for worker in status.alive:
                if worker.endpoint is None:
                    answers[worker.client_id] = "no endpoint known"
                    continue
                try:
                    code, body = WorkerClient(worker.endpoint, streams_deployment.auth_token).control(
                        config.action
                    )
                except WorkerUnreachableError as exc:
                    raise dg.Failure(description=f"{worker.client_id}: {exc}") from exc
                if code >= 300:
                    raise dg.Failure(
                        description=f"{worker.client_id}: {config.action} answered {code}: {body}"
                    )
                answers[worker.client_id] = body
        data = {
            "action": config.action,
            "alive": [w.client_id for w in status.alive],
            "dead": [w.client_id for w in status.dead],
            "workers": answers,
        }
        context.log.info(
            f"{app.name} workers {config.action}: {len(status.alive)} alive, {len(status.dead)} dead"
        )
        context.add_output_metadata({"result": dg.MetadataValue.json(data)})
        return data

    return _one_op_job(workers, f"{app.name}_workers", "Stop, scale, pause, resume or restart the workers.")


def build_jobs(app: ResolvedStreamApp) -> list[dg.JobDefinition]:
    jobs = [_topics_job(app), _reset_job(app), _compaction_job(app), _backfill_job(app), _workers_job(app)]
    jobs.append(dlq_replay_job(app))
    jobs.append(prune_snapshots_job(app))
    return [j for j in jobs if j is not None]
