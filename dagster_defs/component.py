"""The YAML component: declare a stream application without writing Python.

In a ``dg`` project (``dg scaffold defs dagster_defs.StreamAppComponent my_app --app orders``
writes ``defs/my_app/defs.yaml``; ``dg.load_from_defs_folder`` loads it)::

    type: dagster_defs.StreamAppComponent
    attributes:
      name: my_app
      app: orders                      # an installed plugin (or topology: module:factory)
      app_config: {big_order_amount: 100}
      streams: {application_id: my-app, commit_interval_ms: 1000}
      workers: 2
      translation:                     # optional: override any asset's spec, per kind
        group_name: "streams_{{ kind }}"
        tags: {team: payments}

The attributes are the fields of :class:`~dagster_defs.spec.StreamAppSpec` plus
``translation`` (Dagster's asset attributes, templated with ``kind``, ``name``, ``app``,
``application_id`` and ``spec``); ``dg check yaml`` and the code location load validate them.
Several apps of one defs folder that share a topic produce ONE asset for it: each component
reads its siblings' ``defs.yaml``, and the first app (by name) naming a topic emits it with
the lineage of all (:func:`~dagster_defs.factory.shared_topic_specs`).
Subclass the component and override :meth:`StreamAppComponent.get_translator` for changes YAML
cannot express.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Any, Literal

import dagster as dg
import yaml
from dagster.components.utils.translation import TranslationFn, TranslationFnResolver
from pydantic import BaseModel, Field

from dagster_defs.factory import build_stream_app_defs, shared_topic_specs
from dagster_defs.spec import ResolvedStreamApp, StreamAppSpec, resolve_app
from dagster_defs.translator import StreamAppTranslator, StreamAssetProps, safe_name

__all__ = [
    "StreamAppComponent",
    "StreamAppScaffolder",
    "TranslatedStreamAppTranslator",
    "load_app_components",
    "load_component_file",
]


def _template_vars(props: StreamAssetProps) -> dict[str, Any]:
    return {
        "kind": props.kind,
        "name": props.name,
        "app": props.app.name,
        "application_id": props.app.application_id,
    }


class TranslatedStreamAppTranslator(StreamAppTranslator):
    """A translator with the YAML ``translation`` applied on top of another translator's specs.

    Keys come from the translated spec too, so a renamed topic is renamed in the deps of the
    apps reading it as well.
    """

    def __init__(self, base: StreamAppTranslator, translation: TranslationFn[StreamAssetProps]) -> None:
        self._base = base
        self._translation = translation

    def get_asset_spec(self, props: StreamAssetProps) -> dg.AssetSpec:
        base = self._base.get_asset_spec(props)
        if props.kind == "app":  # deps through this translator: translated topic keys
            base = base.replace_attributes(
                deps=[
                    self.get_asset_key(StreamAssetProps("input_topic", t, props.app))
                    for t in props.app.source_topics
                ]
            )
        elif props.kind in ("output_topic", "store"):
            base = base.replace_attributes(
                deps=[self.get_asset_key(StreamAssetProps("app", props.app.name, props.app))]
            )
        return self._translation(base, props)

    def get_asset_key(self, props: StreamAssetProps) -> dg.AssetKey:
        return self._translation(self._base.get_asset_spec(props).replace_attributes(deps=[]), props).key


class StreamAppScaffoldParams(BaseModel):
    """``dg scaffold defs dagster_defs.StreamAppComponent <dir> --json-params '{...}'``."""

    app: str | None = Field(default=None, description="An installed app plugin (platform-streams apps list).")
    topology: str | None = Field(default=None, description="Or a 'module:factory' import path.")
    workers: int = Field(default=1, ge=1)


class StreamAppScaffolder(dg.Scaffolder[StreamAppScaffoldParams]):
    """Writes ``defs.yaml`` with the directory's name as the app name and application id."""

    @classmethod
    def get_scaffold_params(cls) -> type[StreamAppScaffoldParams]:
        return StreamAppScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest[StreamAppScaffoldParams]) -> None:
        from dagster.components.component_scaffolding import scaffold_component

        params = request.params or StreamAppScaffoldParams()
        name = safe_name(request.target_path.name)
        source = {"topology": params.topology} if params.topology else {"app": params.app or name}
        attributes = {
            "name": name,
            **source,
            "streams": {"application_id": name.replace("_", "-")},
            "workers": params.workers,
        }
        scaffold_component(request, attributes)


@dg.scaffold_with(StreamAppScaffolder)
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
    translation: (
        Annotated[TranslationFn[StreamAssetProps], TranslationFnResolver[StreamAssetProps](_template_vars)]
        | None
    ) = None

    def to_spec(self) -> StreamAppSpec:
        return StreamAppSpec.model_validate(
            {k: getattr(self, k) for k in StreamAppSpec.model_fields if k in type(self).model_fields}
        )

    def get_translator(self) -> StreamAppTranslator:
        base = StreamAppTranslator()
        return base if self.translation is None else TranslatedStreamAppTranslator(base, self.translation)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        app = resolve_app(self.to_spec())
        others = [(resolve_app(c.to_spec()), c.get_translator()) for c in _sibling_components(context, self)]
        apps = sorted([(app, self.get_translator()), *others], key=lambda pair: pair[0].name)
        topics = shared_topic_specs(apps)[app.name]
        return build_stream_app_defs(app, translator=self.get_translator(), topic_specs=topics)


def _sibling_components(context: dg.ComponentLoadContext, me: StreamAppComponent) -> list[StreamAppComponent]:
    """The other StreamAppComponents of the defs folder (each ``defs.yaml`` naming one)."""
    root = Path(context.defs_module_path)
    found: list[StreamAppComponent] = []
    for path in sorted(root.rglob("defs.yaml")):
        if path.parent == Path(context.path) or not _declares_stream_app(path):
            continue
        component = context.load_component(path.parent)
        if isinstance(component, StreamAppComponent) and component.name != me.name:
            found.append(component)
    return found


def _declares_stream_app(path: Path) -> bool:
    for document in yaml.safe_load_all(path.read_text()):
        declared = str((document or {}).get("type", ""))
        if declared.endswith("StreamAppComponent"):
            return True
    return False


def load_component_file(path: Path) -> StreamAppComponent:
    """One ``type: ...StreamAppComponent`` YAML file (the ``defs.yaml`` format of a dg project).

    Read here rather than through a dg project's defs folder, so the repository's own code
    location stays a plain module (``dagster dev -m dagster_defs``); the attributes go through
    the same component model validation.
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
    apps: list[tuple[ResolvedStreamApp, StreamAppTranslator]] = [
        (resolve_app(c.to_spec()), c.get_translator()) for c in components
    ]
    topics = shared_topic_specs(apps)
    parts = [build_stream_app_defs(a, translator=t, topic_specs=topics[a.name]) for a, t in apps]
    return dg.Definitions.merge(dg.Definitions(), *parts)
