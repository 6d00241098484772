"""The worker runtime: StreamsRuntime, StreamWorker, StreamTask and their collaborators.

The client applications use, :class:`platform_streams.KafkaStreams`, composes the runtime
with metrics, interactive queries and the HTTP endpoint (platform_streams/kafka_streams.py).
"""

from platform_streams.runtime.api import ClientAddOn, RuntimeView, WorkerState, WorkerView
from platform_streams.runtime.lifecycle import State, StreamsUncaughtExceptionResponse
from platform_streams.runtime.streams_runtime import StreamsRuntime

__all__ = [
    "ClientAddOn",
    "RuntimeView",
    "State",
    "StreamsRuntime",
    "StreamsUncaughtExceptionResponse",
    "WorkerState",
    "WorkerView",
]
