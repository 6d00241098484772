"""The Streams group protocol (KIP-1071) over kio's generated codec: membership requests,
describes, and commits that carry a streams member's id and epoch (see docs/streams-groups.md)."""

from platform_streams.kafka.streams_group.client import (
    STREAMS_GROUP_HEARTBEAT_KEY,
    CommitRefused,
    StreamsGroupClient,
    broker_supports_streams_groups,
    error_name,
    group_metadata,
)

__all__ = [
    "STREAMS_GROUP_HEARTBEAT_KEY",
    "CommitRefused",
    "StreamsGroupClient",
    "broker_supports_streams_groups",
    "error_name",
    "group_metadata",
]
