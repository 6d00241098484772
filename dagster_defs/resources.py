"""Dagster resources: the Kafka connection, the deployment target, Spark.

Each is a pydantic ``ConfigurableResource``, so its fields show (and are validated) in the
Dagster UI, and secrets come from the environment through ``dg.EnvVar`` rather than the
code. They hold configuration and hand out the objects that do the work (a launcher, a
StreamsConfig fragment, a SparkSession); the assets, checks, sensors and jobs never read
the environment themselves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from dagster_defs.deploy.kubernetes import CommandRunner, HelmLauncher
from dagster_defs.deploy.local import LocalProcessLauncher

__all__ = ["KafkaResource", "SparkResource", "StreamsDeploymentResource"]

DEPLOY_DIR_ENV = "PLATFORM_STREAMS_DEPLOY_DIR"


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
            ("security.protocol", self.security_protocol),
            ("sasl.mechanism", self.sasl_mechanism),
            ("sasl.username", self.sasl_username),
            ("sasl.password", self.sasl_password),
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

    def secret_env(self) -> dict[str, str]:
        """Environment of worker processes carrying the secrets (merged into client_config)."""
        if not self.sasl_password:
            return {}
        return {"PLATFORM_STREAMS_CLIENT_CONFIG": json.dumps({"sasl.password": self.sasl_password})}

    def client_conf(self) -> dict[str, Any]:
        """A librdkafka dict for admin clients and readers (with the secrets)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self._client_settings()}


class StreamsDeploymentResource(dg.ConfigurableResource):
    """Where worker processes run: ``local`` processes (the embedded default) or ``kubernetes``."""

    target: Literal["local", "kubernetes"] = "local"
    root_dir: str = Field(
        default_factory=lambda: os.environ.get(DEPLOY_DIR_ENV, str(Path("state") / "deployments")),
        description="Local: records, settings, worker state, logs. Kubernetes: rendered values.",
    )
    http_auth_token: str | None = Field(default=None, description="Worker endpoint bearer token (dg.EnvVar).")
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

    def launcher(self, runner: CommandRunner | None = None) -> LocalProcessLauncher | HelmLauncher:
        if self.target == "local":
            return LocalProcessLauncher(
                self.root_dir,
                auth_token=self.http_auth_token,
                start_timeout_s=self.start_timeout_s,
                stop_timeout_s=self.stop_timeout_s,
            )
        return HelmLauncher(
            self.root_dir,
            namespace=self.namespace,
            chart=self.chart,
            image=self.image,
            kube_context=self.kube_context,
            dry_run=self.helm_dry_run,
            runner=runner,
            auth_token=self.http_auth_token,
            extra_values=dict(self.helm_values),
        )


class SparkResource(dg.ConfigurableResource):
    """The SparkSession of the compaction and backfill jobs (needs ``pip install '.[spark]'``)."""

    master: str = Field(default="local[*]", description="Spark master URL.")
    app_name: str = "platform-streams-dagster"
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings.")
    ui: bool = Field(default=False, description="Serve the Spark UI while a job runs.")

    def session(self) -> Any:
        from platform_streams.ops.spark.session import spark_session  # pyspark only here

        return spark_session(self.master, self.app_name, self.conf, ui=self.ui)
