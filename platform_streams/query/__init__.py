"""Interactive queries (Kafka Streams' IQv2): typed queries, results, positions, routing metadata.

Run a query against the stores this instance hosts with ``KafkaStreams.query``::

    from platform_streams.query import KeyQuery, StateQueryRequest

    result = streams.query(StateQueryRequest.in_store("counts").with_query(KeyQuery.with_key("alice")))
    answer = result.get_only_partition_result()

and find which instance hosts a key with ``KafkaStreams.query_metadata_for_key`` (instances
share their tasks through the ``<application_id>-metadata`` topic). The worker HTTP
endpoint (:mod:`platform_streams.server`) answers queries for any key by forwarding to
the owner.
"""

from platform_streams.query.lags import LagInfo
from platform_streams.query.metadata import HostInfo, KeyQueryMetadata, StreamsMetadata
from platform_streams.query.position import Position, PositionBound
from platform_streams.query.queries import (
    KeyQuery,
    MultiVersionedKeyQuery,
    Query,
    RangeQuery,
    VersionedKeyQuery,
    WindowKeyQuery,
    WindowRangeQuery,
)
from platform_streams.query.request import StateQueryRequest
from platform_streams.query.results import FailureReason, QueryResult, StateQueryResult

__all__ = [
    "FailureReason",
    "HostInfo",
    "KeyQuery",
    "KeyQueryMetadata",
    "LagInfo",
    "MultiVersionedKeyQuery",
    "Position",
    "PositionBound",
    "Query",
    "QueryResult",
    "RangeQuery",
    "StateQueryRequest",
    "StateQueryResult",
    "StreamsMetadata",
    "VersionedKeyQuery",
    "WindowKeyQuery",
    "WindowRangeQuery",
]
