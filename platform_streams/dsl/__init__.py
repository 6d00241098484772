"""The Streams DSL: builder, streams, tables, groupings, windows and option objects."""

from platform_streams.dsl.builder import StreamsBuilder
from platform_streams.dsl.cogrouped_stream import CogroupedKStream
from platform_streams.dsl.emit_strategy import EmitStrategy
from platform_streams.dsl.grouped_stream import KGroupedStream
from platform_streams.dsl.grouped_table import KGroupedTable
from platform_streams.dsl.kstream import BranchedKStream, KStream
from platform_streams.dsl.ktable import GlobalKTable, KTable
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
    TableJoined,
)
from platform_streams.dsl.printed import Printed
from platform_streams.dsl.suppress import BufferConfig, Suppressed
from platform_streams.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from platform_streams.dsl.windowed_stream import SessionWindowedKStream, TimeWindowedKStream
from platform_streams.dsl.windows import (
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    UnlimitedWindows,
)
from platform_streams.state.windowed import SessionWindow, TimeWindow, Window, Windowed

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "CogroupedKStream",
    "Consumed",
    "EmitStrategy",
    "GlobalKTable",
    "Grouped",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Printed",
    "Produced",
    "Repartitioned",
    "SessionWindow",
    "SessionWindowedKStream",
    "SessionWindowedSerde",
    "SessionWindows",
    "SlidingWindows",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TableJoined",
    "TimeWindow",
    "TimeWindowedKStream",
    "TimeWindowedSerde",
    "TimeWindows",
    "UnlimitedWindows",
    "Window",
    "Windowed",
]
