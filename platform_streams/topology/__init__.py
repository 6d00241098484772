"""The topology compiler: logical graph -> sub-topologies -> description."""

from platform_streams.topology.compiler import SubTopologyPlan, TopologyPlan, compile_topology
from platform_streams.topology.describe import SubtopologyDescription, TopologyDescription
from platform_streams.topology.nodes import InternalTopic, ProcessorNode, SinkNode, SourceNode, StatelessOp
from platform_streams.topology.topology import Topology

__all__ = [
    "InternalTopic",
    "ProcessorNode",
    "SinkNode",
    "SourceNode",
    "StatelessOp",
    "SubTopologyPlan",
    "SubtopologyDescription",
    "Topology",
    "TopologyDescription",
    "TopologyPlan",
    "compile_topology",
]
