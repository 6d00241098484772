"""A count of every key for ``platform-streams run`` (test_store_corruption.py, ``--workers``).

``$COUNT_INPUT -> group_by_key().count(store "counts") -> $COUNT_OUTPUT``, with the record
cache (so the fused source runs the count in line, reading the store on a cache miss): the
last value output per key is the key's count.
"""

from __future__ import annotations

import os

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.serde import String


def topology() -> StreamsBuilder:
    s = String()
    builder = StreamsBuilder()
    (
        builder.stream(os.environ["COUNT_INPUT"], Consumed(key_serde=s, value_serde=s))
        .group_by_key()
        .count(materialized=Materialized.as_("counts"))
        .to_stream()
        .map_values(str)
        .to(os.environ["COUNT_OUTPUT"], Produced(key_serde=s, value_serde=s))
    )
    return builder
