"""Schema Registry subjects on the topic assets: metadata, and a compatibility check.

A topic the application reads or writes through a registry serde (``serde.Avro``,
``serde.Protobuf``, ``serde.JsonSchema``) shows, on its asset:

* as definition metadata (no registry call at load time): the subject of each such key
  or value serde and the schema the application was built with ("deployed with");
* through the asset check ``<app>_schema_compatible``: the subject's latest schema (id,
  version, text) and whether the application's schema is compatible with it, asked of the
  registry's compatibility endpoint under the subject's own compatibility level. The check
  fails (ERROR) for an incompatible latest schema -- a producer registered a version the
  deployed application cannot read -- and warns when the registry cannot be asked.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import dagster as dg

from dagster_defs.spec import ResolvedStreamApp
from dagster_defs.translator import StreamAppTranslator, StreamAssetProps, safe_name
from platform_streams.topology.nodes import SinkNode, SourceNode

__all__ = ["schema_check_defs", "topic_registry_serdes", "topic_schema_metadata"]

_REGISTRY_MODULE = "platform_streams.kafka.schema_registry"


def topic_registry_serdes(app: ResolvedStreamApp, topic: str) -> dict[str, Any]:
    """``{"key"|"value": serde}``: the registry serdes the application uses on ``topic``."""
    module = sys.modules.get(_REGISTRY_MODULE)
    if module is None:  # registry serdes load that module: none exists without it
        return {}
    config = app.validated_settings()
    found: dict[str, Any] = {}
    for node in app.topology.nodes.values():
        if not isinstance(node, SourceNode | SinkNode):
            continue
        if (isinstance(node, SourceNode) and topic in node.topics) or (
            isinstance(node, SinkNode) and node.topic == topic
        ):
            for field, serde, default in (
                ("key", node.key_serde, config.default_key_serde),
                ("value", node.value_serde, config.default_value_serde),
            ):
                chosen = serde or default
                if isinstance(chosen, module.RegistrySerde):
                    found.setdefault(field, chosen)
    return found


def _schema_json(text: str | None) -> Any:
    if text is None:
        return dg.MetadataValue.null()
    try:
        return dg.MetadataValue.json(json.loads(text))
    except ValueError:  # a .proto
        return dg.MetadataValue.md(f"```\n{text}\n```")


def topic_schema_metadata(app: ResolvedStreamApp, topic: str) -> dict[str, Any]:
    """The subjects and deployed schemas of ``topic``'s registry serdes (no registry call)."""
    from platform_streams.kafka.schema_checks import deployed_schema, subject_for

    metadata: dict[str, Any] = {}
    for field, serde in topic_registry_serdes(app, topic).items():
        metadata["schema_registry"] = serde.settings.url
        metadata[f"{field}_subject"] = subject_for(serde, topic) or dg.MetadataValue.null()
        metadata[f"{field}_schema_format"] = serde.kind
        if serde.kind != "protobuf":  # rendering a .proto needs confluent-kafka's serializer
            mine = deployed_schema(serde)
            metadata[f"{field}_deployed_schema"] = _schema_json(mine.schema_str if mine else None)
    return metadata


def _or_null(value: Any) -> Any:
    return dg.MetadataValue.null() if value is None else value


def _evaluate(app: ResolvedStreamApp, topic: str) -> dg.AssetCheckResult:
    from platform_streams.kafka.schema_checks import check_schema

    metadata: dict[str, Any] = {"topic": topic}
    incompatible, unknown = [], []
    for field, serde in topic_registry_serdes(app, topic).items():
        found = check_schema(serde, topic)
        metadata[f"{field}_subject"] = found.subject or dg.MetadataValue.null()
        metadata[f"{field}_schema_id"] = _or_null(found.schema_id)
        metadata[f"{field}_version"] = _or_null(found.version)
        metadata[f"{field}_schema"] = _schema_json(found.latest_schema)
        metadata[f"{field}_deployed_schema"] = _schema_json(found.deployed_schema)
        compatible = found.compatible
        metadata[f"{field}_compatible"] = _or_null(compatible)
        if compatible is False:
            incompatible.append(f"{found.subject} version {found.version} (schema id {found.schema_id})")
        elif found.error is not None:
            unknown.append(f"{field}: {found.error}")
    if incompatible:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            description=(
                f"{topic}: the latest schema of {', '.join(incompatible)} is not compatible with the "
                f"schema {app.application_id} was deployed with"
            ),
            metadata=metadata,
        )
    # no subject yet (nothing written) is not a failure; a registry that cannot be asked is a warning
    unreachable = [u for u in unknown if "has no schema registered" not in u]
    return dg.AssetCheckResult(
        passed=not unreachable,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(unknown) or f"{topic}: the latest schemas are compatible with the deployed",
        metadata=metadata,
    )


def schema_check_defs(
    app: ResolvedStreamApp, translator: StreamAppTranslator
) -> list[dg.AssetChecksDefinition]:
    """One ``<app>_schema_compatible`` check per input/output topic with a registry serde."""
    checks: dict[dg.AssetKey, dg.AssetChecksDefinition] = {}
    for kind, topics in (("input_topic", app.source_topics), ("output_topic", app.sink_topics)):
        for topic in topics:
            key = translator.get_asset_key(StreamAssetProps(kind, topic, app))  # type: ignore[arg-type]
            if key in checks or not topic_registry_serdes(app, topic):
                continue

            def make(topic: str, key: dg.AssetKey) -> dg.AssetChecksDefinition:
                @dg.asset_check(
                    asset=key,
                    name=f"{safe_name(app.name)}_schema_compatible",
                    description=(
                        f"The latest registered schemas of {topic} are compatible with the ones "
                        f"{app.application_id} was deployed with (the registry's compatibility check)."
                    ),
                )
                def _check() -> dg.AssetCheckResult:
                    return _evaluate(app, topic)

                return _check

            checks[key] = make(topic, key)
    return list(checks.values())
