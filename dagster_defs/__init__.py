"""Dagster code location for platform_streams: ``dagster dev -m dagster_defs``.

Stream applications become assets (the app, its topics and stores), asset checks, a health
sensor and operations jobs; see :mod:`dagster_defs.factory` for what is built and
:mod:`dagster_defs.definitions` for the resources and their environment variables.
"""

from dagster_defs.component import StreamAppComponent
from dagster_defs.definitions import defs
from dagster_defs.factory import build_stream_app_defs, build_streams_defs
from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource
from dagster_defs.spec import StreamAppSpec, resolve_app
from dagster_defs.translator import StreamAppTranslator, StreamAssetProps

__all__ = [
    "KafkaResource",
    "SparkResource",
    "StreamAppComponent",
    "StreamAppSpec",
    "StreamAppTranslator",
    "StreamAssetProps",
    "StreamsDeploymentResource",
    "build_stream_app_defs",
    "build_streams_defs",
    "defs",
    "resolve_app",
]
