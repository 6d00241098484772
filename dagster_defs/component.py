"""The YAML component: declare a stream application without writing Python.

::

    # dagster_defs/apps/orders.yaml
    type: dagster_defs.component.StreamAppComponent
    attributes:
      name: orders_app
      app: orders                      # an installed plugin (or topology: module:factory)
      app_config: {big_order_amount: 100}
      streams: {application_id: orders-app, commit_interval_ms: 1000}
      workers: 2

The attributes are the fields of :class:`~dagster_defs.spec.StreamAppSpec`; Dagster
validates them against this model when the code location loads. Subclass the component
and override :meth:`StreamAppComponent.get_translator` to change keys, groups or tags.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal

import dagster as dg
import yaml

from dagster_defs.factory import build_stream_app_defs, build_streams_defs
from dagster_defs.spec import StreamAppSpec
from dagster_defs.translator import StreamAppTranslator

__all__ = ["StreamAppComponent", "load_app_components", "load_component_file"]


class StreamAppComponent(dg.Component, dg.Model, dg.Resolvable):
    """One stream application as assets, checks, a sensor and jobs."""

    name: str
    app: str | None = None
    topology: str | None = None
    app_config: dict[str, Any] = {}
    streams: dict[str, Any] = {}
    workers: int = 1
    deployment: Literal["local", "kubernetes"] = "local"
    group: str | None = None
    description: str | None = None
    max_lag: int = 1000
    backfill: dict[str, Any] = {}

    def to_spec(self) -> StreamAppSpec:
        return StreamAppSpec.model_validate(
            {k: v for k, v in self.model_dump().items() if k in StreamAppSpec.model_fields}
        )

    def get_translator(self) -> StreamAppTranslator:
        return StreamAppTranslator()

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_stream_app_defs(self.to_spec(), translator=self.get_translator())


def load_component_file(path: Path) -> StreamAppComponent:
    """One ``type: ...StreamAppComponent`` YAML file (the ``defs.yaml`` format of a dg project).

    Read here rather than through a dg project's defs folder, so the code location stays a
    plain module (``dagster dev -m dagster_defs``); the attributes go through the same
    component model validation.
    """
    document = yaml.safe_load(path.read_text()) or {}
    declared = str(document.get("type", ""))
    component_cls = _component_class(declared, path)
    return component_cls.from_attributes_dict(attributes=dict(document.get("attributes") or {}))


def _component_class(declared: str, path: Path) -> type[StreamAppComponent]:
    module_name, _, attr = declared.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), attr) if module_name else None
    except (ImportError, AttributeError):
        found = None
    if not (isinstance(found, type) and issubclass(found, StreamAppComponent)):
        raise ValueError(f"{path}: type must name a StreamAppComponent class, got {declared!r}")
    return found


def load_app_components(paths: list[Path]) -> dg.Definitions:
    """Load several component YAML files into one Definitions (shared topics merged)."""
    components = [load_component_file(p) for p in paths]
    specs = [c.to_spec() for c in components]
    translator = components[0].get_translator() if components else None
    return build_streams_defs(specs, translator=translator)
