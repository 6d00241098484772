"""The worker HTTP endpoint: metrics, health, state and the interactive-query API.

Started by :class:`~platform_streams.KafkaStreams` when ``http_port`` is set (0 picks a
free port); see :mod:`platform_streams.server.routes` for the paths.
"""

from platform_streams.server.http import WorkerHttpServer
from platform_streams.server.routes import Api, Response

__all__ = ["Api", "Response", "WorkerHttpServer"]
