"""The worker HTTP API, independent of the HTTP server that carries it.

::

    GET /health/live                      200 unless the client is in ERROR / NOT_RUNNING
    GET /health/ready                     200 when RUNNING and no store is restoring, else 503
    GET /metrics                          Prometheus text format
    GET /state                            lifecycle state, workers, tasks, assignment, lag, instances
    GET /stores                           queryable stores
    GET|PUT|POST /control/<action>        status, pause, resume, restart (server/control.py)
    GET /stores/<store>/keys/<key>        one key (404 if absent)
    GET /stores/<store>/metadata/<key>    which instance hosts the key (active, standbys, partition)
    GET /stores/<store>/range?from=&to=&prefix=&limit=&order=desc
    GET /stores/<store>/windows/<key>?from=&to=     windows of one key (start in [from, to])
    GET /stores/<store>/windows?from=&to=&limit=     every key's windows starting in [from, to]
    GET /stores/<store>/keys/<key>?as_of=<ms>        a versioned store: the version valid then
    GET /stores/<store>/versions/<key>?from=&to=&order=asc   a versioned store: every version

Key-scoped queries of a store whose keys are not murmur2-placed (query/placement.py) ask
every partition's owner and merge (server/scatter.py). Otherwise they are answered here
when this instance runs the key's partition as an active task, else forwarded to the owner
(``local=true`` on the hop stops re-forwarding; server/forwarding.py). A standby or a
restoring active answers only a caller that accepts staleness (``max_lag=<records>``),
saying how stale (``"lag"``, ``X-Streams-Lag``); otherwise a restoring active is a 503 naming
it and its lag, a failed owner a 502 naming it (server/key_routing.py). Scans ask every instance for
the partitions it owns and merge (``missing_partitions`` lists what nobody answered).

With ``http_auth_token`` set every path but ``/health/*`` needs ``Authorization: Bearer
<token>``: missing -> 401, wrong -> 403. Bad input is a 4xx with a JSON ``error``; an
unexpected failure is a 500 that is logged -- never an exception in a worker.
"""

from __future__ import annotations

import hmac
import logging
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from platform_streams.errors import InvalidStateStoreError, StreamsStateError, StreamsTimeoutError
from platform_streams.query import queries
from platform_streams.query.metadata import HostInfo
from platform_streams.query.queries import KeyQuery, Query, RangeQuery, WindowKeyQuery, WindowRangeQuery
from platform_streams.query.request import StateQueryRequest
from platform_streams.query.results import FailureReason, QueryResult
from platform_streams.server.codec import MalformedKeyError, dumps, jsonable, parse_key, parse_number
from platform_streams.server.control import handle_control
from platform_streams.server.forwarding import LAG_HEADER, ForwardError, forward
from platform_streams.server.key_routing import Refused, answer_key, max_lag_of
from platform_streams.server.scatter import scatter_key_query, window_rows
from platform_streams.state.versioned_store import VersionedRecord

if TYPE_CHECKING:
    from platform_streams.kafka_streams import KafkaStreams

__all__ = ["Api", "Response"]

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
_MAX_TIME = 2**63 - 1
_NOT_LIVE = frozenset({"ERROR", "PENDING_ERROR", "NOT_RUNNING"})


@dataclass(slots=True)
class Response:
    """Status, body and headers of one answer."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class HttpError(Exception):
    """Ends a request with ``status`` and a JSON ``{"error": message}``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def _json(status: int, document: Any) -> Response:
    return Response(status, dumps(document))


def _flag(params: dict[str, str], name: str) -> bool:
    return params.get(name, "").strip().lower() in ("1", "true", "yes")


class Api:
    """Routes requests of one client's HTTP endpoint (see the module docstring)."""

    def __init__(self, streams: KafkaStreams) -> None:
        self._streams = streams
        token = streams.config.http_auth_token
        self._token = token.get_secret_value() if token is not None else None

    # ------------------------------------------------------------------ entry point

    def handle(self, method: str, target: str, headers: Any) -> Response:
        """Answer one request; never raises."""
        try:
            return self._handle(method, target, headers)
        except (HttpError, Refused) as exc:
            return _json(exc.status, {"error": str(exc), **exc.extra})
        except Exception:
            log.exception("HTTP %s %s failed", method, target)
            return _json(500, {"error": "internal error (see the worker log)"})

    def _handle(self, method: str, target: str, headers: Any) -> Response:
        split = urllib.parse.urlsplit(target)
        segments = [urllib.parse.unquote(s) for s in split.path.split("/") if s]
        if len(segments) == 2 and segments[0] == "control":  # status/pause/resume/restart (control.py)
            self._authorize(headers)
            status, document = handle_control(self._streams, method, segments[1])
            return _json(status, document)
        if method != "GET":
            raise HttpError(405, f"method {method} is not allowed (use GET)")
        try:
            pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True, strict_parsing=False)
        except ValueError as exc:
            raise HttpError(400, f"malformed query string: {exc}") from None
        params = dict(pairs)
        if segments[:1] == ["health"] and len(segments) == 2:
            return self._health(segments[1])
        self._authorize(headers)
        match segments:
            case ["metrics"]:
                body, content_type = self._streams.metrics.render()
                return Response(200, body, content_type)
            case ["state"]:
                return _json(200, self._state())
            case ["stores"]:
                return _json(200, {"stores": sorted(self._streams.plan.topology.stores)})
            case ["stores", store, "keys", key]:
                return self._key_query(store, key, params, window=False)
            case ["stores", store, "windows", key]:
                return self._key_query(store, key, params, window=True)
            case ["stores", store, "versions", key]:
                return self._key_query(store, key, params, window=False, versions=True)
            case ["stores", store, "metadata", key]:
                return self._metadata(store, key)
            case ["stores", store, "range"]:
                return self._scan(store, self._range_query(store, params), params, split.path)
            case ["stores", store, "windows"]:
                return self._scan(store, self._window_range(params), params, split.path)
        raise HttpError(404, f"no such resource: {split.path}")

    def _authorize(self, headers: Any) -> None:
        if self._token is None:
            return
        given = headers.get("Authorization") if headers is not None else None
        if not given:
            raise HttpError(401, "missing bearer token")
        scheme, _, token = str(given).partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self._token.encode()
        ):
            raise HttpError(403, "invalid bearer token")

    # ------------------------------------------------------------------ health and state

    def _health(self, which: str) -> Response:
        state = self._streams.state().value
        if which == "live":
            return _json(503 if state in _NOT_LIVE else 200, {"status": "live", "state": state})
        if which == "ready":
            restoring = self._streams.interactive_queries.restoring_tasks()
            ready = state == "RUNNING" and not restoring
            return _json(200 if ready else 503, {"ready": ready, "state": state, "restoring": restoring})
        raise HttpError(404, f"no such health check: {which}")

    def _state(self) -> dict[str, Any]:
        streams = self._streams
        service = streams.interactive_queries
        recorders = streams.metrics.threads
        workers = []
        for worker in list(streams.workers):
            tasks = list(worker.tasks.items())
            recorder = recorders.get(worker.name)
            lag = dict(recorder.lag) if recorder is not None else {}
            workers.append(
                {
                    "thread_id": worker.name,
                    "state": worker.state.value,
                    "active_tasks": sorted(str(t) for t, _ in tasks),
                    # standby tasks belong to the client's updater, not a worker ("tasks" below)
                    "standby_tasks": [],
                    "assignment": sorted(f"{tp[0]}-{tp[1]}" for _, task in tasks for tp in task.partitions),
                    "lag": {f"{t}-{p}": n for (t, p), n in sorted(lag.items())},
                    "processed_total": worker.processed_total,
                    "snapshot_restores": _snapshot_restores(worker.state_lifecycle.last_snapshots),
                    # group_protocol="streams": member epoch, statuses, the broker's group state
                    "streams_group": worker.streams_group_view(),
                }
            )
        return {
            "application_id": streams.config.application_id,
            "client_id": streams.config.effective_client_id,
            "application_server": str(service.host) if service.host is not None else None,
            "state": streams.state().value,
            "restoring_tasks": service.restoring_tasks(),
            "workers": workers,
            "instances": [m.to_dict() for m in service.metadata_for_all_clients()],
            # state-aware assignment: each task's role here (active/standby/warmup) and lag
            "tasks": coordinator.task_view() if (coordinator := streams.coordinator) else {},
        }

    # ------------------------------------------------------------------ key-scoped queries

    def _known_store(self, store: str) -> None:
        if not self._streams.interactive_queries.has_store(store):
            raise HttpError(404, f"unknown state store {store!r}", store=store)

    def _key_of(self, store: str, text: str) -> Any:
        try:
            return parse_key(text, self._streams.interactive_queries.store_key_serde(store))
        except MalformedKeyError as exc:
            raise HttpError(400, str(exc), store=store) from None

    def _metadata(self, store: str, key_text: str) -> Response:
        self._known_store(store)
        key = self._key_of(store, key_text)
        meta = self._run(lambda: self._streams.interactive_queries.query_metadata_for_key(store, key))
        return _json(200, {"store": store, "key": key, **meta.to_dict()})

    def _key_query(
        self, store: str, key_text: str, params: dict[str, str], *, window: bool, versions: bool = False
    ) -> Response:
        self._known_store(store)
        key = self._key_of(store, key_text)
        service = self._streams.interactive_queries
        query: Query
        if versions or (not window and service.is_versioned(store)):
            query = self._versioned_query(store, key, params, versions)
        elif window:
            time_from, time_to = self._times(params)
            if time_from is None and time_to is None:
                query = WindowRangeQuery.with_key(key)
            else:
                query = WindowKeyQuery.with_key_and_window_start_range(key, time_from or 0, _upper(time_to))
        else:
            query = KeyQuery.with_key(key)
        kind = "versions" if versions else "windows" if window else "keys"
        path = "/".join(["", "stores", _q(store), kind, _q(key_text)])
        if not service.key_routable(store) or _flag(params, "scatter"):
            status, document = scatter_key_query(self, store, key, path, query, params, window=window)
            return _json(status, document)
        try:
            bound = max_lag_of(params)
        except ValueError as exc:
            raise HttpError(400, str(exc), store=store) from None
        partition = self._run(lambda: service.key_partition(store, key))
        request = StateQueryRequest.in_store(store).with_query(query).with_partitions({partition})
        return answer_key(self, store, key, path, partition, request, params, window=window, bound=bound)

    def _versioned_query(self, store: str, key: Any, params: dict[str, str], versions: bool) -> Query:
        """``/keys/<key>?as_of=`` of a versioned store: Kafka's VersionedKeyQuery (the latest
        version without ``as_of``); ``/versions/<key>?from=&to=&order=asc``: its
        MultiVersionedKeyQuery (newest first by default, as Kafka's)."""
        if not self._streams.interactive_queries.is_versioned(store):
            raise HttpError(400, f"store {store!r} is not versioned: ask /keys/<key>", store=store)
        if not versions:
            try:
                as_of = parse_number(params.get("as_of"), "as_of")
            except ValueError as exc:
                raise HttpError(400, str(exc), store=store) from None
            single = queries.VersionedKeyQuery.with_key(key)
            return single if as_of is None else single.as_of(as_of)
        time_from, time_to = self._times(params)
        multi = queries.MultiVersionedKeyQuery.with_key(key)
        multi = multi if time_from is None else multi.from_time_ms(time_from)
        multi = multi if time_to is None else multi.to_time_ms(time_to)
        return multi.with_ascending_timestamps() if params.get("order", "").lower() == "asc" else multi

    def _local(self, request: StateQueryRequest, partition: int) -> QueryResult | None:
        """This instance's successful answer for ``partition``, None if it has none."""
        result = self._run(lambda: self._streams.interactive_queries.query(request))
        answer = result.partition_results.get(partition)
        if answer is None:
            return None
        if answer.is_failure() and answer.failure_reason is not None:
            if answer.failure_reason in (FailureReason.STORE_EXCEPTION, FailureReason.UNKNOWN_QUERY_TYPE):
                raise HttpError(
                    400 if answer.failure_reason is FailureReason.UNKNOWN_QUERY_TYPE else 500,
                    answer.failure_message,
                )
            return None
        return answer

    def _key_answer(
        self, store: str, key: Any, partition: int, answer: QueryResult, window: bool, *, lag: int | None
    ) -> Response:
        """The answer of a running active (``lag`` None: fresh) or of a stale copy ``lag``
        records behind its changelog's end."""
        document: dict[str, Any] = {
            "store": store,
            "key": key,
            "partition": partition,
            "served_by": self._self_host(),
            "stale": lag is not None,
            "lag": lag or 0,
            "position": answer.position.to_dict(),
        }
        headers = {LAG_HEADER: str(lag or 0)}
        if window:
            document["windows"] = window_rows(answer.result)
            return Response(200, dumps(document), headers=headers)
        if isinstance(answer.result, list) and self._streams.interactive_queries.is_versioned(store):
            document["versions"] = answer.result  # a MultiVersionedKeyQuery: none is an empty list
            return Response(200, dumps(document), headers=headers)
        if isinstance(answer.result, VersionedRecord):  # the version valid at as_of
            document.update(jsonable(answer.result))
            return Response(200, dumps(document), headers=headers)
        if answer.result is None:
            return Response(404, dumps({**document, "error": "key not found"}), headers=headers)
        document["value"] = answer.result
        return Response(200, dumps(document), headers=headers)

    # ------------------------------------------------------------------ scans

    def _range_query(self, store: str, params: dict[str, str]) -> Query:
        self._known_store(store)
        prefix = params.get("prefix")
        descending = params.get("order", "asc").lower() == "desc"
        if prefix is not None:
            query = RangeQuery.with_prefix(self._key_of(store, prefix))
        else:
            lower = params.get("from")
            upper = params.get("to")
            query = RangeQuery.with_range(
                self._key_of(store, lower) if lower not in (None, "") else None,
                self._key_of(store, upper) if upper not in (None, "") else None,
            )
        return query.with_descending_keys() if descending else query

    def _window_range(self, params: dict[str, str]) -> Query:
        time_from, time_to = self._times(params)
        if time_from is None or time_to is None:
            raise HttpError(400, "a window scan needs from= and to= (epoch milliseconds)")
        return WindowRangeQuery.with_window_start_range(time_from, time_to)

    def _scan(self, store: str, query: Query, params: dict[str, str], path: str) -> Response:
        self._known_store(store)
        service = self._streams.interactive_queries
        limit = self._limit(params)
        count = self._run(lambda: service.store_partitions(store))
        wanted = self._partitions(params, count)
        request = StateQueryRequest.in_store(store).with_query(query).with_partitions(wanted).require_active()
        result = self._run(lambda: service.query(request, limit=limit))
        rows: list[Any] = []
        answered: set[int] = set()
        for partition, answer in result.partition_results.items():
            if answer.is_success():
                answered.add(partition)
                rows.extend(jsonable({"key": k, "value": v}) for k, v in answer.result)
            elif answer.failure_reason is FailureReason.UNKNOWN_QUERY_TYPE:
                raise HttpError(400, answer.failure_message, store=store)
        missing = set(wanted) - answered
        if missing and not _flag(params, "local"):
            for host, partitions in self._owners(store, missing).items():
                extra = self._remote_scan(
                    host, path, {**params, "partitions": ",".join(map(str, partitions))}
                )
                if extra is not None:
                    rows.extend(extra.get("rows", []))
                    answered.update(int(p) for p in extra.get("partitions", []))
        missing = set(wanted) - answered
        rows.sort(key=lambda row: _order(row.get("key")), reverse=params.get("order", "").lower() == "desc")
        return _json(
            200,
            {
                "store": store,
                "rows": rows[:limit],
                "partitions": sorted(answered),
                "missing_partitions": sorted(missing),
                "complete": not missing,
                "served_by": self._self_host(),
            },
        )

    def _owners(self, store: str, partitions: set[int]) -> dict[HostInfo, list[int]]:
        service = self._streams.interactive_queries
        directory = service.directory
        owners: dict[HostInfo, list[int]] = {}
        if directory is None:
            return owners
        for partition in sorted(partitions):
            host = directory.active_host(str(service.task_of(store, partition)))
            if host is not None and host != service.host:
                owners.setdefault(host, []).append(partition)
        return owners

    def _remote_scan(self, host: HostInfo, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        try:
            answer = forward(host, urllib.parse.quote(path), params, self._token)
        except ForwardError as exc:
            log.warning("scan on %s failed: %s", host, exc)
            return None
        if answer.status != 200:
            log.warning("scan on %s answered %d: %s", host, answer.status, answer.body[:200])
            return None
        document = orjson.loads(answer.body)
        return document if isinstance(document, dict) else None

    # ------------------------------------------------------------------ helpers

    def _relay(self, owner: HostInfo, path: str, params: dict[str, str]) -> Response:
        answer = forward(owner, path, params, self._token)
        headers = {"X-Forwarded-To": str(owner)}
        if answer.lag is not None:
            headers[LAG_HEADER] = str(answer.lag)
        return Response(answer.status, answer.body, answer.content_type or "application/json", headers)

    def _self_host(self) -> str | None:
        host = self._streams.interactive_queries.host
        return str(host) if host is not None else None

    @staticmethod
    def _run(call: Callable[[], Any]) -> Any:
        """Map the library's errors to HTTP statuses."""
        try:
            return call()
        except InvalidStateStoreError as exc:
            raise HttpError(404, str(exc)) from None
        except (StreamsStateError, StreamsTimeoutError) as exc:
            raise HttpError(503, str(exc)) from None
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None

    @staticmethod
    def _times(params: dict[str, str]) -> tuple[int | None, int | None]:
        try:
            return (
                parse_number(params.get("from"), "from", 0, _MAX_TIME),
                parse_number(params.get("to"), "to", 0, _MAX_TIME),
            )
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None

    @staticmethod
    def _limit(params: dict[str, str]) -> int:
        try:
            limit = parse_number(params.get("limit"), "limit")
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None
        if limit is None:
            return DEFAULT_LIMIT
        if not 0 < limit <= MAX_LIMIT:
            raise HttpError(400, f"limit must be 1..{MAX_LIMIT}, got {limit}")
        return limit

    @staticmethod
    def _partitions(params: dict[str, str], count: int) -> set[int]:
        text = params.get("partitions")
        if not text:
            return set(range(count))
        try:
            wanted = {parse_number(p, "partitions", 0, count - 1) for p in text.split(",") if p}
        except ValueError as exc:
            raise HttpError(
                400, f"partitions must be comma-separated partition numbers 0..{count - 1}: {exc}"
            ) from None
        return {p for p in wanted if p is not None}


def _upper(value: int | None) -> int:
    return _MAX_TIME if value is None else value


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _order(key: Any) -> tuple[int, Any]:
    """Sort keys of one store across partitions: numbers, then text, then the rest by JSON."""
    if isinstance(key, bool):
        return (2, str(key))
    if isinstance(key, int | float):
        return (0, key)
    if isinstance(key, str):
        return (1, key)
    return (2, orjson.dumps(key, default=str).decode())


def _snapshot_restores(restores: Mapping[Any, Sequence[Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per task: the state snapshots its stores were restored from at its last assignment."""
    return {
        str(task): [
            {
                "store": r.store_name,
                "snapshot_id": r.manifest.snapshot_id,
                "offset": r.manifest.offset,
                "keys": r.manifest.record_count,
                "seconds": round(r.seconds, 3),
            }
            for r in used
        ]
        for task, used in sorted(restores.items(), key=lambda item: str(item[0]))
        if used
    }
