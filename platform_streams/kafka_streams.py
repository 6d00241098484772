"""``KafkaStreams``: the client applications use -- the runtime plus its add-ons.

The runtime (:class:`~platform_streams.runtime.streams_runtime.StreamsRuntime`) runs the
workers; this class composes it with what reads it: the metrics registry (served on
``/metrics``), interactive queries (IQv2, key -> host metadata) and the worker HTTP
endpoint. Each add-on is built here with the runtime's typed view
(:class:`~platform_streams.runtime.api.RuntimeView`), so the runtime itself never imports
``metrics``, ``query`` or ``server`` (an import-linter contract, pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.metrics import StreamsMetrics
from platform_streams.query.lags import LagInfo, by_store
from platform_streams.query.metadata import KeyQueryMetadata, StreamsMetadata, advertised_host
from platform_streams.query.request import StateQueryRequest
from platform_streams.query.results import StateQueryResult
from platform_streams.query.service import InteractiveQueries
from platform_streams.runtime.streams_runtime import StreamsRuntime
from platform_streams.serde.base import Serde
from platform_streams.server.http import WorkerHttpServer
from platform_streams.topology.topology import Topology

__all__ = ["KafkaStreams"]


class KafkaStreams(StreamsRuntime):
    """Runs a topology with ``num_stream_threads`` workers; ``start()`` returns at once."""

    def __init__(self, topology: Topology | Any, config: StreamsConfig | Mapping[str, Any]) -> None:
        super().__init__(topology, config)
        #: this client's interactive queries, metrics (served on /metrics) and HTTP endpoint
        self.interactive_queries = InteractiveQueries(self)
        self.metrics = StreamsMetrics(self, queries=self.interactive_queries)
        self.add_ons += [self.metrics, self.interactive_queries]
        self.http_server: WorkerHttpServer | None = None

    # -- interactive queries (see platform_streams.query) ----------------------------------

    def query(self, request: StateQueryRequest) -> StateQueryResult:
        """Run an interactive query (IQv2) on the store partitions this instance hosts."""
        return self.interactive_queries.query(request)

    def query_metadata_for_key(
        self, store_name: str, key: Any, key_serde: Serde | None = None
    ) -> KeyQueryMetadata:
        """Which instance (``application_server``) hosts ``key`` of a store as active, which as standbys."""
        return self.interactive_queries.query_metadata_for_key(store_name, key, key_serde)

    def all_local_store_partition_lags(self) -> dict[str, dict[int, LagInfo]]:
        """``{store: {partition: LagInfo}}`` for every store partition this client holds:
        active tasks (running: at their changelog's end; restoring) and standbys. Asks the
        broker for the changelogs' end offsets (Kafka's ``allLocalStorePartitionLags``)."""
        return by_store(self.interactive_queries.local_lags())

    def metadata_for_all_clients(self) -> list[StreamsMetadata]:
        """Every instance of the application with its tasks and stores (this one alone without
        an ``application_server``)."""
        return self.interactive_queries.metadata_for_all_clients()

    def streams_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The instances hosting ``store_name`` (active or standby)."""
        return [m for m in self.metadata_for_all_clients() if store_name in m.state_store_names]

    def __enter__(self) -> KafkaStreams:
        return self

    # -- serving --------------------------------------------------------------------------

    def _start_serving(self) -> None:
        """Start the HTTP endpoint (``http_port`` set) and, when this instance has an address,
        share its tasks with the other instances."""
        if self.config.http_port is not None:
            self.http_server = WorkerHttpServer(self)
            self.http_server.start()
        bound = self.http_server.address if self.http_server is not None else None
        host = advertised_host(self.config.application_server, bound)
        if host is not None:
            self.interactive_queries.start_directory(host)

    def _stop_serving(self, *, clean: bool) -> None:
        super()._stop_serving(clean=clean)
        server, self.http_server = self.http_server, None
        if server is not None:
            server.close()
