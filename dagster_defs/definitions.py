"""The code location: every ``apps/*.yaml`` stream application, with default resources.

Resources come from the environment, so one code location serves a laptop and a cluster:

* ``PLATFORM_STREAMS_BOOTSTRAP_SERVERS`` -- the Kafka bootstrap servers (``make demo`` sets it to
  its embedded broker); ``PLATFORM_STREAMS_SASL_PASSWORD`` etc. through ``dg.EnvVar``;
* ``PLATFORM_STREAMS_DEPLOY_DIR`` -- where local deployments keep records, state, logs;
* ``PLATFORM_STREAMS_DEPLOY_TARGET`` -- ``local`` (default) or ``kubernetes``;
* ``PLATFORM_STREAMS_HTTP_AUTH_TOKEN`` -- the workers' endpoint token, when set;
* ``PLATFORM_STREAMS_SPARK_MASTER`` -- the Spark master (``local[*]`` by default);
* ``PLATFORM_STREAMS_DAGSTER_APPS`` -- another directory of app YAML files (tests, demos).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_defs.component import load_app_components
from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource
from platform_streams.config_sources import BOOTSTRAP_ENV, apply_bootstrap_alias

__all__ = ["APPS_DIR", "default_resources", "defs"]

APPS_DIR = Path(os.environ.get("PLATFORM_STREAMS_DAGSTER_APPS") or Path(__file__).parent / "apps")


def _secret(name: str) -> Any:
    """``dg.EnvVar(name)`` when the variable is set (resolved at run time, never logged)."""
    return dg.EnvVar(name) if os.environ.get(name) else None


def default_resources() -> dict[str, Any]:
    apply_bootstrap_alias(os.environ)
    return {
        "kafka": KafkaResource(
            bootstrap_servers=dg.EnvVar(BOOTSTRAP_ENV),
            security_protocol=os.environ.get("PLATFORM_STREAMS_SECURITY_PROTOCOL"),
            sasl_mechanism=os.environ.get("PLATFORM_STREAMS_SASL_MECHANISM"),
            sasl_username=_secret("PLATFORM_STREAMS_SASL_USERNAME"),
            sasl_password=_secret("PLATFORM_STREAMS_SASL_PASSWORD"),
        ),
        "streams_deployment": StreamsDeploymentResource(
            target="kubernetes"
            if os.environ.get("PLATFORM_STREAMS_DEPLOY_TARGET") == "kubernetes"
            else "local",
            http_auth_token=_secret("PLATFORM_STREAMS_HTTP_AUTH_TOKEN"),
        ),
        "spark": SparkResource(master=os.environ.get("PLATFORM_STREAMS_SPARK_MASTER", "local[*]")),
    }


def build_defs(apps_dir: Path = APPS_DIR) -> dg.Definitions:
    apps = load_app_components(sorted(apps_dir.glob("*.yaml")))
    return dg.Definitions.merge(apps, dg.Definitions(resources=default_resources()))


defs = build_defs()
