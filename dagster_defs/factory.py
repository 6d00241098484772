"""The factory: a stream application spec -> assets, checks, a sensor and jobs.

:func:`build_stream_app_defs` is what the YAML component and Python users call. It emits

* the **app asset**: materializing it deploys the workers at the current fingerprint
  (start if absent, roll if the fingerprint or connection changed, repair/scale if workers
  died or the count changed, nothing otherwise); ``code_version`` is the fingerprint, so
  the UI flags the asset when the code location's topology or config moved on;
* **input topics** upstream and **output topics** and **stores** downstream, as external
  assets (the workers, not Dagster runs, write them; the sensor observes them);
* four **asset checks** on the app asset (:data:`dagster_defs.health.CHECKS`), and the deploy
  gate's (:mod:`dagster_defs.deploy_gate`), which the materialization also runs first;
* on topics read or written through a Schema Registry serde, the subjects and deployed
  schemas as metadata and a schema compatibility check (:mod:`dagster_defs.schemas`);
* a **sensor** polling the workers (observations, check results, a re-materialization
  when workers died);
* **jobs** mirroring the CLI (:mod:`dagster_defs.jobs`).

Resources are looked up by key: ``kafka`` (:class:`KafkaResource`), ``streams_deployment``
(:class:`StreamsDeploymentResource`) and, for the Spark jobs, ``spark``.
"""

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.definitions.data_version import DATA_VERSION_IS_USER_PROVIDED_TAG, DATA_VERSION_TAG

from dagster_defs.deploy_gate import DeployGateConfig, deploy_gate_check, run_deploy_gate
from dagster_defs.health import (
    CHECKS,
    CheckOutcome,
    dead_letter_outcome,
    internal_topics_outcome,
    lag_outcome,
    observe_workers,
    workers_outcome,
)
from dagster_defs.jobs import build_jobs
from dagster_defs.observations import app_metadata, rate
from dagster_defs.resources import KafkaResource, StreamsDeploymentResource
from dagster_defs.schemas import schema_check_defs, topic_schema_metadata
from dagster_defs.shadow_replay import shadow_replay_defs
from dagster_defs.spec import ResolvedStreamApp, StreamAppSpec, resolve_app
from dagster_defs.translator import StreamAppTranslator, StreamAssetProps
from platform_streams.config.sources import BOOTSTRAP_ENV
from platform_streams.errors import BrokerError
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.kafka.authorized import missing_operations, not_allowed

__all__ = ["build_stream_app_defs", "build_streams_defs", "health_sensor_name", "shared_topic_specs"]

SENSOR_INTERVAL_S = 30


def health_sensor_name(app: ResolvedStreamApp) -> str:
    return f"{app.name}_health"


def _severity(outcome: CheckOutcome) -> dg.AssetCheckSeverity:
    return dg.AssetCheckSeverity.WARN if outcome.warn_only else dg.AssetCheckSeverity.ERROR


def _check_result(outcome: CheckOutcome) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=outcome.passed,
        description=outcome.description,
        metadata=outcome.metadata,
        severity=_severity(outcome),
    )


def _ledger_dir(deployment: StreamsDeploymentResource, app: ResolvedStreamApp) -> Path:
    return deployment.deploy_root / app.name / "health"


def _evaluate(
    app: ResolvedStreamApp, name: str, kafka: KafkaResource, deployment: StreamsDeploymentResource
) -> CheckOutcome:
    """Run one check by name (shared by the asset checks and the sensor)."""
    conf = kafka.client_conf()
    if name == "consumer_lag":
        return lag_outcome(app, conf)
    if name == "workers_running":
        status = deployment.launcher().status(app.name)
        return workers_outcome(status, observe_workers(status, deployment.auth_token))
    if name == "dead_letter_not_growing":
        return dead_letter_outcome(app, conf, _ledger_dir(deployment, app))
    return internal_topics_outcome(app, app.validated_settings(kafka.client_settings()))


def _check_names(app: ResolvedStreamApp) -> list[str]:
    return [n for n in CHECKS if n != "dead_letter_not_growing" or app.dead_letter_topic is not None]


def _app_asset(app: ResolvedStreamApp, spec: dg.AssetSpec) -> dg.AssetsDefinition:
    @dg.multi_asset(specs=[spec], name=f"{app.name}_deploy")
    def deploy(
        context: dg.AssetExecutionContext,
        kafka: KafkaResource,
        streams_deployment: StreamsDeploymentResource,
        config: DeployGateConfig,
    ) -> dg.MaterializeResult:
        # before any worker is touched: a refused change leaves the running ones as they are
        gate = run_deploy_gate(app, kafka, config.allow_incompatible, context.log)
        launcher = streams_deployment.launcher()
        request = app.deployment_request(kafka.connection_settings(), kafka.secret_env())
        result = launcher.ensure(request)
        context.log.info(f"{app.name}: {result.action} ({result.reason})")
        record = result.record
        return dg.MaterializeResult(
            asset_key=spec.key,
            metadata={
                "action": result.action,
                "reason": result.reason,
                "fingerprint": record.fingerprint,
                "workers": record.desired_workers,
                "worker_endpoints": dg.MetadataValue.json([w.endpoint for w in record.workers if w.endpoint]),
                "worker_pids": dg.MetadataValue.json([w.pid for w in record.workers]),
                "started": len(result.started),
                "stopped": len(result.stopped),
                "internal_topics": dg.MetadataValue.json(app.internal_topics),
                "topology": dg.MetadataValue.md(f"```\n{app.topology.describe()}\n```"),
                **{f"deploy_gate_{k}": v for k, v in gate.items()},
            },
        )

    return deploy


def _asset_checks(app: ResolvedStreamApp, key: dg.AssetKey) -> list[dg.AssetChecksDefinition]:
    checks = []
    for name in _check_names(app):

        def make(check: str) -> dg.AssetChecksDefinition:
            @dg.asset_check(asset=key, name=check, description=CHECKS[check])
            def _check(
                kafka: KafkaResource, streams_deployment: StreamsDeploymentResource
            ) -> dg.AssetCheckResult:
                return _check_result(_evaluate(app, check, kafka, streams_deployment))

            return _check

        checks.append(make(name))
    return checks


def _topic_ends(conf: dict[str, Any], topics: Sequence[str]) -> dict[str, int]:
    """Records ever written to each topic (sum of log end offsets); missing topics are left out.

    A topic the principal may not read is hidden as if it were missing: that is refused in
    one line instead of leaving the topic's observation out without a word."""
    with KafkaAdmin(conf) as admin:
        counts = {t: n for t, n in admin.partition_counts(topics).items() if n}
        denied = missing_operations(admin, {t: ["READ"] for t in topics if t not in counts}, {})
    if denied:
        raise BrokerError(not_allowed(denied, "dagster"), code="TOPIC_AUTHORIZATION_FAILED")
    ends = log_end_offsets(conf, [(t, p) for t, n in counts.items() for p in range(n)])
    totals = dict.fromkeys(counts, 0)
    for (topic, _p), end in ends.items():
        totals[topic] += end
    return totals


def _broker_unreachable(kafka: KafkaResource) -> str | None:
    """One clear sentence when Kafka cannot be reached (the sensor skips the tick with it)."""
    try:
        with KafkaAdmin(kafka.client_conf(), request_timeout=5.0) as admin:
            admin.list_topics(timeout=5.0)
    except BrokerError as exc:
        return (
            f"Kafka is unreachable at {kafka.bootstrap_servers!r} ({exc}); nothing observed. "
            f"Start the broker or set {BOOTSTRAP_ENV}."
        )
    return None


def _health_sensor(
    app: ResolvedStreamApp, translator: StreamAppTranslator, app_key: dg.AssetKey
) -> dg.SensorDefinition:
    topic_keys = {
        t: translator.get_asset_key(StreamAssetProps("input_topic", t, app)) for t in app.source_topics
    } | {t: translator.get_asset_key(StreamAssetProps("output_topic", t, app)) for t in app.sink_topics}
    store_keys = {s: translator.get_asset_key(StreamAssetProps("store", s, app)) for s in app.stores}

    @dg.sensor(
        name=health_sensor_name(app),
        minimum_interval_seconds=SENSOR_INTERVAL_S,
        asset_selection=dg.AssetSelection.assets(app_key),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Polls the workers of {app.application_id!r}: throughput, lag, latency, check "
        "results, topic and store sizes (numeric observations on the asset pages); re-materializes the "
        "app when deployed workers died.",
    )
    def health(
        context: dg.SensorEvaluationContext,
        kafka: KafkaResource,
        streams_deployment: StreamsDeploymentResource,
    ) -> dg.SensorResult | dg.SkipReason:
        unreachable = _broker_unreachable(kafka)
        if unreachable is not None:
            return dg.SkipReason(unreachable)
        conf = kafka.client_conf()
        status = streams_deployment.launcher().status(app.name)
        seen = observe_workers(status, streams_deployment.auth_token)
        outcomes = {"workers_running": workers_outcome(status, seen)}
        for name in _check_names(app):
            if name not in outcomes:
                outcomes[name] = _evaluate(app, name, kafka, streams_deployment)
        now = time.time()
        previous = json.loads(context.cursor) if context.cursor else {}
        elapsed = now - float(previous["at"]) if "at" in previous else None
        ends = _topic_ends(conf, list(topic_keys))
        before = previous.get("topics", {})
        topic_rates = {t: rate(n, before.get(t), elapsed) for t, n in ends.items()}
        out_rates = [topic_rates[t] for t in app.sink_topics if t in topic_rates]
        metrics = seen.metrics
        numbers: dict[str, float | int | None] = {
            "records_in_per_s": rate(seen.processed_total, previous.get("processed"), elapsed),
            "records_out_per_s": None if None in out_rates else round(sum(r or 0.0 for r in out_rates), 3),
            "consumer_lag": outcomes["consumer_lag"].metadata.get("total_lag"),
            "e2e_latency_p99_ms": metrics.e2e_p99_ms(),
            "restored_records": metrics.totals["restored"],
            "dead_letter_records": metrics.totals["dead_letter"],
            "dropped_records": metrics.totals["dropped"],
            "processed_total": seen.processed_total,
            "workers_alive": len(status.alive),
            "workers_dead": len(status.dead),
        }
        app_meta = app_metadata(
            numbers, seen.endpoints, streams_deployment.grafana_base_url, app.application_id
        )
        app_meta |= {
            "worker_states": dg.MetadataValue.json(seen.states),
            "paused": dg.MetadataValue.json(seen.paused),
        }
        events: list[dg.AssetObservation | dg.AssetCheckEvaluation | dg.AssetMaterialization] = [
            dg.AssetObservation(asset_key=app_key, metadata=app_meta)
        ]
        for topic, records in ends.items():
            events.append(
                dg.AssetObservation(
                    asset_key=topic_keys[topic],
                    metadata={"records": records, "records_per_s": _or_null(topic_rates[topic])},
                    # the data version Dagster's automation compares (as an observable source's)
                    tags={DATA_VERSION_TAG: str(records), DATA_VERSION_IS_USER_PROVIDED_TAG: "true"},
                )
            )
        for store, entries in metrics.store_entries.items():
            if store in store_keys:
                events.append(dg.AssetObservation(asset_key=store_keys[store], metadata={"entries": entries}))
        for name, outcome in outcomes.items():
            events.append(
                dg.AssetCheckEvaluation(
                    asset_key=app_key,
                    check_name=name,
                    passed=outcome.passed,
                    metadata=outcome.metadata,
                    severity=_severity(outcome),
                    description=outcome.description,
                )
            )
        runs = []
        if status.deployed and status.dead and status.record is not None:
            dead = ",".join(sorted(w.client_id for w in status.dead))
            runs.append(
                dg.RunRequest(
                    run_key=f"repair-{app.name}-{status.record.updated_at}-{dead}",
                    asset_selection=[app_key],
                    tags={"platform_streams/reason": f"workers died: {dead}"},
                )
            )
        cursor = json.dumps({"processed": seen.processed_total, "topics": ends, "at": now})
        return dg.SensorResult(run_requests=runs, asset_events=events, cursor=cursor)

    return health


def _or_null(value: float | None) -> Any:
    return dg.MetadataValue.null() if value is None else value


def build_stream_app_defs(
    spec: StreamAppSpec | ResolvedStreamApp | Mapping[str, Any],
    *,
    translator: StreamAppTranslator | None = None,
    include_external_topics: bool = True,
    topic_specs: Mapping[dg.AssetKey, dg.AssetSpec] | None = None,
) -> dg.Definitions:
    """Everything for one stream application (see the module docstring); no resources bound.

    ``topic_specs`` (this app's entry of :func:`shared_topic_specs`) are the topic assets this
    app emits when several apps share topics: every topic is emitted once, by its owner, with
    the lineage of all apps; the other apps only name it in their deps.
    """
    app = spec if isinstance(spec, ResolvedStreamApp) else resolve_app(spec)
    tr = translator or StreamAppTranslator()
    app_spec = tr.get_asset_spec(StreamAssetProps("app", app.name, app))
    external: list[dg.AssetSpec] = [tr.get_asset_spec(StreamAssetProps("store", s, app)) for s in app.stores]
    if include_external_topics:
        owned = shared_topic_specs([(app, tr)])[app.name] if topic_specs is None else topic_specs
        external += list(owned.values())
    shadow, shadow_job = shadow_replay_defs(app, app_spec.key)
    topic_checks = schema_check_defs(app, tr) if include_external_topics else []
    return dg.Definitions(
        assets=[_app_asset(app, app_spec), *external, shadow],
        asset_checks=[*_asset_checks(app, app_spec.key), deploy_gate_check(app, app_spec.key), *topic_checks],
        sensors=[_health_sensor(app, tr, app_spec.key)],
        jobs=[*build_jobs(app), shadow_job],
    )


def shared_topic_specs(
    apps: Sequence[tuple[ResolvedStreamApp, StreamAppTranslator]],
) -> dict[str, dict[dg.AssetKey, dg.AssetSpec]]:
    """app name -> the topic assets it emits, over ``apps``: a topic several apps name is one
    asset, owned by the first of them (description, group, tags), downstream of every app
    writing it. Give the apps in a stable order, so every caller decides the same owners."""
    topics: dict[dg.AssetKey, dg.AssetSpec] = {}
    owner: dict[dg.AssetKey, str] = {}
    for app, tr in apps:
        for kind, names in (("input_topic", app.source_topics), ("output_topic", app.sink_topics)):
            for topic in names:
                made = tr.get_asset_spec(StreamAssetProps(kind, topic, app))  # type: ignore[arg-type]
                made = made.merge_attributes(metadata=topic_schema_metadata(app, topic))
                known = topics.get(made.key)
                if known is not None:
                    deps = {d.asset_key: d for d in [*known.deps, *made.deps]}
                    made = known.replace_attributes(deps=list(deps.values()))
                topics[made.key] = made
                owner.setdefault(made.key, app.name)
    owned: dict[str, dict[dg.AssetKey, dg.AssetSpec]] = {app.name: {} for app, _ in apps}
    for key, made in topics.items():
        owned[owner[key]][key] = made
    return owned


def build_streams_defs(
    specs: Iterable[StreamAppSpec | ResolvedStreamApp | Mapping[str, Any]],
    *,
    translator: StreamAppTranslator | None = None,
) -> dg.Definitions:
    """Several applications in one code location, their shared topics one asset each."""
    tr = translator or StreamAppTranslator()
    apps = [s if isinstance(s, ResolvedStreamApp) else resolve_app(s) for s in specs]
    topics = shared_topic_specs([(a, tr) for a in apps])
    return dg.Definitions.merge(
        *[build_stream_app_defs(a, translator=tr, topic_specs=topics[a.name]) for a in apps]
    )
