"""What a topology keeps on the broker, as JSON: the input of the deploy gate.

A running application writes this manifest to its control topic when it starts
(``topology`` record, see :mod:`platform_streams.runtime.membership.client_membership`), and the deploy gate
(:mod:`platform_streams.ops.topology_diff`) compares a candidate's manifest with it. It holds
what decides whether existing state still fits a new topology: each store's changelog
topic, kind and serdes, each repartition topic with the serdes and partition count it is
written with, the co-partition groups, the input topics and ``describe()``.

Serdes are named by class (and, for a serde of a model or a wrapper, what it wraps): the
bytes on a changelog are only readable by a serde of the same name. A serde left to the
configuration's default is ``"default"`` -- the gate cannot see a changed default.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from platform_streams.topology.compiler import TopologyPlan, compile_topology
from platform_streams.topology.nodes import SinkNode
from platform_streams.topology.topology import Topology

__all__ = ["MANIFEST_VERSION", "TOPOLOGY_KEY", "serde_name", "topology_manifest"]

#: bumped when a field's meaning changes; a reader refuses a version it does not know
MANIFEST_VERSION = 1
#: the control topic's key of the manifest a client runs (the last one written wins)
TOPOLOGY_KEY = "topology"


def serde_name(serde: Any) -> str:
    """A serde's identity: its class, plus the model or inner serde it is made of."""
    if serde is None:
        return "default"
    named = getattr(serde, "name", None)
    if isinstance(named, str) and named:
        return named
    kind = f"{type(serde).__module__}.{type(serde).__qualname__}"
    inner = getattr(serde, "inner", None)
    return f"{kind}({serde_name(inner)})" if inner is not None else kind


def _store_kind(builder: Any) -> str:
    kind = type(builder).__name__
    return f"timestamped {kind}" if getattr(builder, "timestamped", False) else kind


def _repartition_writers(plan: TopologyPlan) -> dict[str, SinkNode]:
    return {
        node.topic: node
        for sub in plan.subtopologies
        for node in sub.nodes
        if isinstance(node, SinkNode) and node.topic is not None and plan.is_internal(node.topic)
    }


def topology_manifest(topology: Topology, plan: TopologyPlan | None = None) -> dict[str, Any]:
    """The manifest of ``topology`` (JSON-able; logical internal topic names)."""
    plan = plan or compile_topology(topology)
    description = str(topology.describe())
    stores: dict[str, dict[str, Any]] = {}
    for sub in plan.subtopologies:
        for name in sub.stores:
            builder = topology.stores[name]
            stores[name] = {
                "changelog": plan.changelog_topic(name) if builder.logging_enabled else None,
                "kind": _store_kind(builder),
                "key_serde": serde_name(getattr(builder, "key_serde", None)),
                "value_serde": serde_name(getattr(builder, "value_serde", None)),
                "subtopology": sub.id,
                "inputs": sorted(sub.source_topics),
            }
    for name, spec in topology.global_stores.items():
        stores[name] = {
            "changelog": None,  # a global store is rebuilt from its source topic
            "kind": f"global {_store_kind(spec.store_builder)}",
            "key_serde": serde_name(getattr(spec.store_builder, "key_serde", None)),
            "value_serde": serde_name(getattr(spec.store_builder, "value_serde", None)),
            "subtopology": None,
            "inputs": sorted(spec.source.topics),
        }
    writers = _repartition_writers(plan)
    repartition = {
        name: {
            "num_partitions": topic.num_partitions,
            "key_serde": serde_name(writers[name].key_serde) if name in writers else "default",
            "value_serde": serde_name(writers[name].value_serde) if name in writers else "default",
        }
        for name, topic in plan.internal_topics.items()
        if topic.kind == "repartition"
    }
    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "source_topics": plan.external_source_topics(),
        "stores": stores,
        "repartition_topics": repartition,
        "copartition_groups": sorted(sorted(g) for g in topology.copartition_groups),
        "describe": description,
    }
    # over the serdes too: describe() does not show them, and a changed serde changes the state
    payload = json.dumps(manifest, sort_keys=True)
    return {"fingerprint": hashlib.sha256(payload.encode()).hexdigest()[:16], **manifest}
