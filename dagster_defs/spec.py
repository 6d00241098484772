"""A stream application as the code location sees it: the spec, and what it resolves to.

:class:`StreamAppSpec` is what a user writes (in Python, or in YAML through the component):
which app (an installed plugin, or a ``module:factory`` import path), its configuration,
its StreamsConfig settings, how many workers, where they run. :func:`resolve_app` turns it
into a :class:`ResolvedStreamApp` at definition load time -- the topology is built and
compiled then, so a wrong config or a broken topology fails the code location load with
the field that is wrong, and the asset graph (topics, stores) is known before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dagster_defs.deploy.base import DeploymentRequest
from platform_streams.apps import APP_CONFIG_ENV, APP_ENV, AppPlugin, app_fingerprint, field_errors, get_app
from platform_streams.cli_app_loader import CliError, load_app
from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.topology.compiler import TopologyPlan, compile_topology
from platform_streams.topology.topology import Topology

__all__ = ["BackfillSpec", "PluginFactory", "ResolvedStreamApp", "StreamAppSpec", "resolve_app"]

PLUGIN_FACTORY = "platform_streams.apps:plugin_topology"
#: Only to validate settings at load time, before the Kafka resource is known.
_PLACEHOLDER_BOOTSTRAP = "localhost:9092"


class BackfillSpec(BaseModel):
    """How the Spark backfill job is partitioned (Dagster's backfill UI launches one run per window)."""

    model_config = ConfigDict(extra="forbid")

    start: str = Field(default="2025-01-01", description="First partition (YYYY-MM-DD).")
    granularity: Literal["hourly", "daily"] = "daily"


class StreamAppSpec(BaseModel):
    """One stream application deployed by this code location."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Asset and job name prefix.")
    app: str | None = Field(default=None, description="An installed app plugin (platform-streams apps list).")
    topology: str | None = Field(default=None, description="Or a 'module:factory' import path.")
    app_config: dict[str, Any] = Field(default_factory=dict, description="The plugin's own configuration.")
    streams: dict[str, Any] = Field(
        default_factory=dict, description="StreamsConfig settings; bootstrap comes from the Kafka resource."
    )
    workers: int = Field(default=1, ge=1, description="Worker processes (each one KafkaStreams client).")
    deployment: Literal["local", "kubernetes"] = "local"
    group: str | None = Field(default=None, description="Dagster asset group (default: the name).")
    description: str | None = None
    max_lag: int = Field(default=1000, ge=0, description="The lag check fails above this many records.")
    backfill: BackfillSpec = Field(default_factory=BackfillSpec)

    @model_validator(mode="after")
    def _one_source(self) -> StreamAppSpec:
        if (self.app is None) == (self.topology is None):
            raise ValueError("give exactly one of 'app' (a plugin name) and 'topology' ('module:factory')")
        if self.topology is not None and self.app_config:
            raise ValueError("'app_config' needs an app plugin; a 'module:factory' takes no configuration")
        if "bootstrap_servers" in self.streams or "bootstrap.servers" in self.streams:
            raise ValueError("'streams' must not set bootstrap servers: they come from the Kafka resource")
        return self


@dataclass(frozen=True)
class PluginFactory:
    """A picklable topology factory for Spark executors: rebuilds the plugin there."""

    app: str
    config: Mapping[str, Any]

    def __call__(self) -> Topology:
        return get_app(self.app).build(dict(self.config))


@dataclass(frozen=True)
class ResolvedStreamApp:
    """A spec with its topology built (see the module docstring)."""

    spec: StreamAppSpec
    topology: Topology
    plugin: AppPlugin | None
    app_config: dict[str, Any]
    settings: dict[str, Any]
    """StreamsConfig settings without the connection: the plugin's defaults, then the spec's."""

    @cached_property
    def plan(self) -> TopologyPlan:
        return compile_topology(self.topology)

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def application_id(self) -> str:
        return str(self.validated_settings().application_id)

    @cached_property
    def fingerprint(self) -> str:
        """The asset's code version: topology, app config and settings (not the connection)."""
        return app_fingerprint(
            self.topology, self.spec.app or self.spec.topology, self.app_config, self.settings
        )

    @property
    def source_topics(self) -> list[str]:
        return sorted(self.plan.external_source_topics())

    @property
    def sink_topics(self) -> list[str]:
        return sorted(self.plan.external_sink_topics())

    @property
    def stores(self) -> list[str]:
        return sorted({s for sub in self.plan.subtopologies for s in sub.stores})

    @property
    def internal_topics(self) -> list[str]:
        return sorted(self.plan.physical_topic(t, self.application_id) for t in self.plan.internal_topics)

    @property
    def dead_letter_topic(self) -> str | None:
        return self.validated_settings().errors_dead_letter_queue_topic_name

    @property
    def factory(self) -> str:
        return PLUGIN_FACTORY if self.plugin is not None else str(self.spec.topology)

    @property
    def spark_app(self) -> Any:
        """What the Spark jobs take as ``app``: an import path, or a picklable plugin factory."""
        return (
            PluginFactory(self.plugin.name, self.app_config)
            if self.plugin is not None
            else self.spec.topology
        )

    def env(self) -> dict[str, str]:
        if self.plugin is None:
            return {}
        return {APP_ENV: self.plugin.name, APP_CONFIG_ENV: json.dumps(self.app_config)}

    def validated_settings(self, connection: Mapping[str, Any] | None = None) -> StreamsConfig:
        """The settings as a StreamsConfig (with ``connection``, else a placeholder broker)."""
        overrides = dict(connection or {"bootstrap_servers": _PLACEHOLDER_BOOTSTRAP})
        return StreamsConfig.load(None, env={}, overrides=overrides, defaults=self.settings)

    def deployment_request(
        self, connection: Mapping[str, Any], secret_env: Mapping[str, str], workers: int | None = None
    ) -> DeploymentRequest:
        return DeploymentRequest(
            name=self.name,
            fingerprint=self.fingerprint,
            factory=self.factory,
            settings={**self.settings, **connection},
            workers=workers or self.spec.workers,
            env=self.env(),
            secret_env=dict(secret_env),
        )


def resolve_app(spec: StreamAppSpec | Mapping[str, Any]) -> ResolvedStreamApp:
    """Build and check the application now (load time); errors name the field that is wrong."""
    if not isinstance(spec, StreamAppSpec):
        spec = StreamAppSpec.model_validate(dict(spec))
    plugin: AppPlugin | None = None
    if spec.app is not None:
        plugin = get_app(spec.app)
        config = plugin.validate_config(spec.app_config)
        topology = plugin.build(config)
        app_config = config.model_dump(mode="json")
        defaults = dict(plugin.default_settings)
    else:
        try:
            loaded = load_app(str(spec.topology))
        except CliError as exc:
            raise StreamsConfigError(f"stream app {spec.name!r}: {exc}") from exc
        topology, app_config, defaults = loaded.topology, {}, dict(loaded.settings)
    resolved = ResolvedStreamApp(spec, topology, plugin, app_config, {**defaults, **spec.streams})
    try:
        resolved.validated_settings()
    except ValidationError as exc:
        errors = "; ".join(e.describe() for e in field_errors(exc))
        raise StreamsConfigError(f"stream app {spec.name!r}: invalid 'streams' settings: {errors}") from exc
    return resolved
