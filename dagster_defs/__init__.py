"""Dagster code location for platform_streams: ``dagster dev -m dagster_defs``.

Stream applications become assets (the app, its topics and stores), asset checks, a health
sensor and operations jobs; see :mod:`dagster_defs.factory` for what is built and
:mod:`dagster_defs.definitions` for the resources and their environment variables.

The package is also ``dg``'s component library (the ``dagster_dg_cli.registry_modules``
entry point): importing it builds nothing; the repository's own code location, ``defs``, is
built on first access (``dagster dev -m dagster_defs``), so ``dg list components`` and a
dg project's ``load_from_defs_folder`` never load the example apps.
"""

from typing import Any

from dagster_defs.component import StreamAppComponent, StreamAppScaffolder
from dagster_defs.factory import build_stream_app_defs, build_streams_defs
from dagster_defs.resources import KafkaResource, SparkResource, StreamsDeploymentResource
from dagster_defs.spec import StreamAppSpec, resolve_app
from dagster_defs.translator import StreamAppTranslator, StreamAssetProps

__all__ = [
    "KafkaResource",
    "SparkResource",
    "StreamAppComponent",
    "StreamAppScaffolder",
    "StreamAppSpec",
    "StreamAppTranslator",
    "StreamAssetProps",
    "StreamsDeploymentResource",
    "build_stream_app_defs",
    "build_streams_defs",
    "defs",
    "resolve_app",
]


def __getattr__(name: str) -> Any:
    if name == "defs":  # built on first access (see the module docstring)
        from dagster_defs.definitions import defs

        return defs
    raise AttributeError(f"module 'dagster_defs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return [*globals(), "defs"]
