"""Dagster resources: the Kafka connection, the deployment target, Spark.

Each is a pydantic ``ConfigurableResource``, so its fields show (and are validated) in the
Dagster UI. Settings are resolved when a run or a sensor tick uses the resource, never when
the code location is imported: the bootstrap servers through ``dg.EnvVar``, and a field left
unset falls back to its ``PLATFORM_STREAMS_*`` variable at that moment (:data:`ENV_FALLBACKS`),
so a secret is never in the code and an unset one is not an import error. They hold
configuration and hand out the objects that do the work (a launcher, a StreamsConfig
fragment, a SparkSession); the assets, checks, sensors and jobs never read the environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from dagster_defs.deploy.kubernetes import CommandRunner, HelmLauncher
from dagster_defs.deploy.local import LocalProcessLauncher
from platform_streams.config.sources import BOOTSTRAP_ENV, apply_bootstrap_alias

__all__ = [
    "ENV_FALLBACKS",
    "KafkaResource",
    "SparkResource",
    "StreamsDeploymentResource",
    "default_resources",
]

DEPLOY_DIR_ENV = "PLATFORM_STREAMS_DEPLOY_DIR"
#: resource field -> the variable read at run time when the field is not set
ENV_FALLBACKS: dict[str, str] = {
    "security_protocol": "PLATFORM_STREAMS_SECURITY_PROTOCOL",
    "sasl_mechanism": "PLATFORM_STREAMS_SASL_MECHANISM",
    "sasl_username": "PLATFORM_STREAMS_SASL_USERNAME",
    "sasl_password": "PLATFORM_STREAMS_SASL_PASSWORD",
    "target": "PLATFORM_STREAMS_DEPLOY_TARGET",
    "root_dir": DEPLOY_DIR_ENV,
    "http_auth_token": "PLATFORM_STREAMS_HTTP_AUTH_TOKEN",
    "grafana_url": "PLATFORM_STREAMS_GRAFANA_URL",
    "master": "PLATFORM_STREAMS_SPARK_MASTER",
}


def _setting(resource: dg.ConfigurableResource, name: str, default: str | None = None) -> str | None:
    """The field's value, else its environment variable now (:data:`ENV_FALLBACKS`), else ``default``."""
    value = getattr(resource, name)
    return value if value is not None else (os.environ.get(ENV_FALLBACKS[name]) or default)


class KafkaResource(dg.ConfigurableResource):
    """How every worker, check and job reaches Kafka."""

    bootstrap_servers: str = Field(
        description="host:port list (e.g. dg.EnvVar('PLATFORM_STREAMS_BOOTSTRAP_SERVERS'))."
    )
    security_protocol: str | None = Field(default=None, description="PLAINTEXT, SSL, SASL_SSL, ...")
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = Field(default=None, description="A secret: set it with dg.EnvVar.")
    client_config: dict[str, str] = Field(default_factory=dict, description="Extra librdkafka settings.")

    def _client_settings(self) -> dict[str, str]:
        conf = dict(self.client_config)
        for key, value in (
            ("security.protocol", _setting(self, "security_protocol")),
            ("sasl.mechanism", _setting(self, "sasl_mechanism")),
            ("sasl.username", _setting(self, "sasl_username")),
            ("sasl.password", _setting(self, "sasl_password")),
        ):
            if value:
                conf[key] = value
        return conf

    def connection_settings(self) -> dict[str, Any]:
        """StreamsConfig settings without secrets (they may be written to disk)."""
        settings: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        public = {k: v for k, v in self._client_settings().items() if k != "sasl.password"}
        if public:
            settings["client_config"] = public
        return settings

    def client_settings(self) -> dict[str, Any]:
        """StreamsConfig settings with the secrets, for work done in this process (checks,
        Spark jobs): never written anywhere (deployments get :meth:`connection_settings`
        and :meth:`secret_env`)."""
        settings: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        if client := self._client_settings():
            settings["client_config"] = client
        return settings

    def secret_env(self) -> dict[str, str]:
        """Environment of worker processes carrying the secrets (merged into client_config)."""
        password = _setting(self, "sasl_password")
        if not password:
            return {}
        return {"PLATFORM_STREAMS_CLIENT_CONFIG": json.dumps({"sasl.password": password})}

    def client_conf(self) -> dict[str, Any]:
        """A librdkafka dict for admin clients and readers (with the secrets)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self._client_settings()}


class StreamsDeploymentResource(dg.ConfigurableResource):
    """Where worker processes run: ``local`` processes (the embedded default) or ``kubernetes``."""

    target: str | None = Field(
        default=None,
        pattern="^(local|kubernetes)$",
        description="local (default) or kubernetes; unset: PLATFORM_STREAMS_DEPLOY_TARGET.",
    )
    root_dir: str | None = Field(
        default=None,
        description="Local: records, settings, worker state, logs. Kubernetes: rendered values. "
        "Unset: PLATFORM_STREAMS_DEPLOY_DIR, else state/deployments.",
    )
    http_auth_token: str | None = Field(
        default=None,
        description="Worker endpoint bearer token (dg.EnvVar); unset: PLATFORM_STREAMS_HTTP_AUTH_TOKEN.",
    )
    grafana_url: str | None = Field(
        default=None,
        description="Grafana's address: the app asset links to its dashboard "
        "(unset: PLATFORM_STREAMS_GRAFANA_URL).",
    )
    start_timeout_s: float = Field(
        default=90.0, gt=0, description="How long a materialization waits for RUNNING."
    )
    stop_timeout_s: float = Field(default=60.0, gt=0, description="SIGTERM grace before SIGKILL (local).")
    # -- kubernetes ---------------------------------------------------------------------------
    namespace: str = "default"
    chart: str = Field(default="helm/platform-streams", description="Helm chart path or reference.")
    image: str = Field(default="platform-streams:latest", description="Worker image (Kubernetes).")
    kube_context: str | None = None
    helm_dry_run: bool = Field(
        default=False, description="Render values and print the helm command, apply nothing."
    )
    helm_values: dict[str, Any] = Field(
        default_factory=dict,
        description="Chart values merged into every release, e.g. {'autoscaling': {'keda': {...}}} "
        "(the workers job's scale then defers to KEDA) or {'zones': {...}}.",
    )

    @property
    def deploy_root(self) -> Path:
        return Path(_setting(self, "root_dir", str(Path("state") / "deployments")) or ".")

    @property
    def auth_token(self) -> str | None:
        return _setting(self, "http_auth_token")

    @property
    def grafana_base_url(self) -> str | None:
        return _setting(self, "grafana_url")

    def launcher(self, runner: CommandRunner | None = None) -> LocalProcessLauncher | HelmLauncher:
        if _setting(self, "target", "local") != "kubernetes":
            return LocalProcessLauncher(
                self.deploy_root,
                auth_token=self.auth_token,
                start_timeout_s=self.start_timeout_s,
                stop_timeout_s=self.stop_timeout_s,
            )
        return HelmLauncher(
            self.deploy_root,
            namespace=self.namespace,
            chart=self.chart,
            image=self.image,
            kube_context=self.kube_context,
            dry_run=self.helm_dry_run,
            runner=runner,
            auth_token=self.auth_token,
            extra_values=dict(self.helm_values),
        )


class SparkResource(dg.ConfigurableResource):
    """The SparkSession of the compaction and backfill jobs (needs ``pip install '.[spark]'``)."""

    master: str | None = Field(
        default=None, description="Spark master URL; unset: PLATFORM_STREAMS_SPARK_MASTER, else local[*]."
    )
    app_name: str = "platform-streams-dagster"
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings.")
    ui: bool = Field(default=False, description="Serve the Spark UI while a job runs.")

    def session(self) -> Any:
        from platform_streams.ops.spark.session import spark_session  # pyspark only here

        return spark_session(
            _setting(self, "master", "local[*]") or "local[*]", self.app_name, self.conf, ui=self.ui
        )


def default_resources() -> dict[str, Any]:
    """The resources of a code location configured by the environment (read at run time)."""
    apply_bootstrap_alias(os.environ)
    return {
        "kafka": KafkaResource(bootstrap_servers=dg.EnvVar(BOOTSTRAP_ENV)),
        "streams_deployment": StreamsDeploymentResource(),
        "spark": SparkResource(),
    }
