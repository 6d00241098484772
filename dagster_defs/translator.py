"""How a stream application's parts become Dagster asset specs (keys, groups, tags, deps).

As in dagster-sling and dagster-dbt, one translator object decides every asset spec the
factory emits, so a user changes naming or grouping by subclassing it and overriding
:meth:`StreamAppTranslator.get_asset_spec` (or one of the per-kind helpers), without
touching the factory. Lineage is fixed by the factory: input topic -> app -> output
topics and stores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import dagster as dg

from dagster_defs.spec import ResolvedStreamApp

__all__ = ["StreamAppTranslator", "StreamAssetProps"]

Kind = Literal["app", "input_topic", "output_topic", "store"]
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def safe_name(text: str) -> str:
    """An asset key part: Kafka names allow '.' and '-', Dagster keys only [A-Za-z0-9_]."""
    return _UNSAFE.sub("_", text)


@dataclass(frozen=True)
class StreamAssetProps:
    """One thing to turn into an asset: its kind, its name (topic or store) and the app."""

    kind: Kind
    name: str
    app: ResolvedStreamApp


class StreamAppTranslator:
    """The default mapping: ``kafka/<topic>``, ``<app>`` and ``<app>/stores/<store>``."""

    def get_asset_key(self, props: StreamAssetProps) -> dg.AssetKey:
        if props.kind == "app":
            return dg.AssetKey([safe_name(props.app.name)])
        if props.kind == "store":
            return dg.AssetKey([safe_name(props.app.name), "stores", safe_name(props.name)])
        return dg.AssetKey(["kafka", safe_name(props.name)])

    def get_group_name(self, props: StreamAssetProps) -> str:
        return safe_name(props.app.spec.group or props.app.name)

    def get_tags(self, props: StreamAssetProps) -> dict[str, str]:
        return {
            "platform_streams/kind": props.kind,
            "platform_streams/application_id": props.app.application_id,
        }

    def get_description(self, props: StreamAssetProps) -> str:
        app = props.app
        if props.kind == "app":
            return app.spec.description or (
                f"Stream application {app.application_id!r} ({app.spec.app or app.spec.topology}). "
                "Materializing deploys its workers at this code version (topology + config fingerprint); "
                "health comes from the checks and the sensor."
            )
        if props.kind == "store":
            return f"State store {props.name!r} of {app.application_id!r} (queryable on the workers)."
        role = "read" if props.kind == "input_topic" else "written"
        return f"Kafka topic {props.name!r}, {role} by {app.application_id!r}."

    def get_kinds(self, props: StreamAssetProps) -> set[str]:
        return (
            {"python", "kafka"}
            if props.kind == "app"
            else ({"rocksdb"} if props.kind == "store" else {"kafka"})
        )

    def get_asset_spec(self, props: StreamAssetProps) -> dg.AssetSpec:
        """The spec of one asset; ``deps`` follow the data flow."""
        app = props.app
        deps: list[dg.AssetKey] = []
        metadata: dict[str, object] = {}
        if props.kind == "app":
            deps = [self.get_asset_key(StreamAssetProps("input_topic", t, app)) for t in app.source_topics]
            metadata = {
                "application_id": app.application_id,
                "topology": dg.MetadataValue.md(f"```\n{app.topology.describe()}\n```"),
                "internal_topics": dg.MetadataValue.json(app.internal_topics),
                "fingerprint": app.fingerprint,
            }
        elif props.kind in ("output_topic", "store"):
            deps = [self.get_asset_key(StreamAssetProps("app", app.name, app))]
            metadata = {"topic" if props.kind == "output_topic" else "store": props.name}
        else:
            metadata = {"topic": props.name}
        return dg.AssetSpec(
            key=self.get_asset_key(props),
            deps=deps,
            description=self.get_description(props),
            group_name=self.get_group_name(props),
            tags=self.get_tags(props),
            kinds=self.get_kinds(props),
            metadata=metadata,
            code_version=app.fingerprint if props.kind == "app" else None,
        )
