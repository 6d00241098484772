"""The Streams DSL: builder, streams, tables, groupings, windows and option objects."""

from platform_streams.dsl.builder import StreamsBuilder
from platform_streams.dsl.kstream import BranchedKStream, KStream
from platform_streams.dsl.options import (
    Branched,
    Consumed,
    Grouped,
    Joined,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    StreamJoined,
)

__all__ = [
    "Branched",
    "BranchedKStream",
    "Consumed",
    "Grouped",
    "Joined",
    "KStream",
    "Materialized",
    "Named",
    "Produced",
    "Repartitioned",
    "StreamJoined",
    "StreamsBuilder",
]
