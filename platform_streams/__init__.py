"""platform_streams: Kafka Streams, rebuilt in Python, native to a data platform.

The public surface is the names below (pinned by a test); everything else is
reachable through its subpackage (``platform_streams.dsl``, ``.serde``,
``.processor``, ``.state``, ``.testing``, ``.kafka``).
"""

from platform_streams import serde
from platform_streams.config import StreamsConfig
from platform_streams.dsl.builder import StreamsBuilder
from platform_streams.errors import StreamsError
from platform_streams.kafka_streams import KafkaStreams
from platform_streams.runtime.lifecycle import State, StreamsUncaughtExceptionResponse
from platform_streams.topology.topology import Topology

__all__ = [
    "KafkaStreams",
    "State",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsError",
    "StreamsUncaughtExceptionResponse",
    "Topology",
    "serde",
]
__version__ = "0.1.0"
