"""The code location: every ``apps/*.yaml`` stream application, with default resources.

Resources come from the environment when a run or sensor tick uses them (never at import:
:func:`dagster_defs.resources.default_resources`), so one code location serves a laptop and a
cluster:

* ``PLATFORM_STREAMS_BOOTSTRAP_SERVERS`` -- the Kafka bootstrap servers (``make demo`` sets it to
  the broker it started); ``PLATFORM_STREAMS_SASL_PASSWORD`` etc. through ``dg.EnvVar``;
* ``PLATFORM_STREAMS_DEPLOY_DIR`` -- where local deployments keep records, state, logs;
* ``PLATFORM_STREAMS_DEPLOY_TARGET`` -- ``local`` (default) or ``kubernetes``;
* ``PLATFORM_STREAMS_HTTP_AUTH_TOKEN`` -- the workers' endpoint token, when set;
* ``PLATFORM_STREAMS_SPARK_MASTER`` -- the Spark master (``local[*]`` by default);
* ``PLATFORM_STREAMS_GRAFANA_URL`` -- Grafana's address, linked from the app asset;
* ``PLATFORM_STREAMS_DAGSTER_APPS`` -- another directory of app YAML files (tests, demos).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from dagster_defs.component import load_app_components
from dagster_defs.resources import default_resources

__all__ = ["APPS_DIR", "default_resources", "defs"]

APPS_DIR = Path(os.environ.get("PLATFORM_STREAMS_DAGSTER_APPS") or Path(__file__).parent / "apps")


def build_defs(apps_dir: Path = APPS_DIR) -> dg.Definitions:
    apps = load_app_components(sorted(apps_dir.glob("*.yaml")))
    return dg.Definitions.merge(apps, dg.Definitions(resources=default_resources()))


defs = build_defs()
