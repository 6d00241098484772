"""The worker runtime: KafkaStreams, StreamWorker, StreamTask and their collaborators."""

from platform_streams.runtime.kafka_streams import KafkaStreams
from platform_streams.runtime.lifecycle import State, StreamsUncaughtExceptionResponse

__all__ = ["KafkaStreams", "State", "StreamsUncaughtExceptionResponse"]
