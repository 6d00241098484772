"""Key queries by scatter-gather, for stores whose keys are not murmur2-placed.

When a store's source topic was produced with another partitioner (confluent-kafka's
default ``consistent_random``; see ``query/placement.py``), the partition of a key cannot
be computed, so routing to "the key's owner" would answer "not found" for keys that exist.
Instead the instance that got the request asks its own active tasks for every partition
and every other owner once (``local=true&scatter=true``: the owner answers from its own
partitions and never forwards), and merges:

* a partition holding the key -> 200 with the value (windows: rows of every partition
  holding the key), ``"scatter": true``;
* no partition holds it and every partition answered -> 404 "key not found" (a window
  query: 200 with no windows, as a routed one answers);
* no partition holds it but some did not answer (rebalancing, restoring, unreachable) ->
  503 naming them: it cannot be known, so the caller retries rather than read a wrong 404.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from platform_streams.query.queries import Query
from platform_streams.query.request import StateQueryRequest
from platform_streams.query.results import QueryResult
from platform_streams.server.codec import jsonable
from platform_streams.server.forwarding import ForwardError, forward

if TYPE_CHECKING:
    from platform_streams.server.routes import Api

__all__ = ["hit_of", "scatter_key_query", "window_rows"]

log = logging.getLogger(__name__)


def _start(row: dict[str, Any]) -> int:
    """A JSON window row's start: ``start_ms``, or its ``window``'s (window range rows)."""
    window = row.get("window")
    start = window.get("start_ms") if isinstance(window, dict) else row.get("start_ms")
    return start if isinstance(start, int) else 0


def window_rows(rows: Any) -> list[dict[str, Any]]:
    """A window key query's ``(start, value)`` rows as JSON objects."""
    return [
        {"start_ms": start, "value": value} if isinstance(start, int) else {"window": start, "value": value}
        for start, value in rows
    ]


def hit_of(partition: int, answer: QueryResult, window: bool, served_by: str | None) -> dict[str, Any] | None:
    """One partition's answer as a hit, None if the key is not in it."""
    if window:
        rows = jsonable(window_rows(answer.result or []))  # as the hops return them
        if not rows:
            return None
        found: dict[str, Any] = {"windows": rows}
    elif answer.result is None:
        return None
    else:
        found = {"value": answer.result}
    return {"partition": partition, "position": answer.position.to_dict(), "served_by": served_by, **found}


def scatter_key_query(
    api: Api,
    store: str,
    key: Any,
    path: str,
    query: Query,
    params: dict[str, str],
    *,
    window: bool,
) -> tuple[int, dict[str, Any]]:
    """``(status, document)`` of a key query asked of every partition (see the module doc).

    ``path`` is the request's percent-encoded path, for the hops. Uses the route helpers of
    :class:`~platform_streams.server.routes.Api` (error mapping, owners, token).
    """
    service = api._streams.interactive_queries
    count = api._run(lambda: service.store_partitions(store))
    wanted = api._partitions(params, count)
    request = StateQueryRequest.in_store(store).with_query(query).with_partitions(wanted).require_active()
    result = api._run(lambda: service.query(request))
    here = api._self_host()
    answered: set[int] = set()
    hits: list[dict[str, Any]] = []
    for partition, answer in sorted(result.partition_results.items()):
        if answer.is_success():
            answered.add(partition)
            hit = hit_of(partition, answer, window, here)
            if hit is not None:
                hits.append(hit)
    if params.get("local", "").strip().lower() in ("1", "true", "yes"):
        # asked by another instance: report this one's partitions only
        return 200, {
            "store": store,
            "key": key,
            "scatter": True,
            "partitions": sorted(answered),
            "hits": hits,
        }
    service.count_scatter(store)
    for host, partitions in api._owners(store, set(wanted) - answered).items():
        hop = {**params, "scatter": "true", "partitions": ",".join(map(str, partitions))}
        try:
            reply = forward(host, path, hop, api._token)
        except ForwardError as exc:
            log.warning("scatter key query of %s on %s failed: %s", store, host, exc)
            continue
        if reply.status != 200:
            log.warning("scatter key query of %s on %s answered %d", store, host, reply.status)
            continue
        document = orjson.loads(reply.body)
        answered.update(int(p) for p in document.get("partitions", []))
        hits.extend(document.get("hits", []))
    missing = sorted(set(wanted) - answered)
    base = {"store": store, "key": key, "scatter": True, "stale": False, "served_by": here}
    if hits:
        hits.sort(key=lambda h: h["partition"])
        first = hits[0]
        document = {
            **base,
            "partition": first["partition"],
            "position": first["position"],
            "partitions_holding_key": [h["partition"] for h in hits],
            "complete": not missing,
        }
        if window:
            document["windows"] = sorted((row for h in hits for row in h["windows"]), key=_start)
        else:
            document["value"] = first["value"]
        return 200, document
    if not missing:  # every partition answered: the key is nowhere (windows: none, as routed)
        if window:
            return 200, {**base, "windows": [], "partitions": sorted(answered), "complete": True}
        return 404, {**base, "error": "key not found", "partitions": sorted(answered)}
    return 503, {
        **base,
        "error": f"key not found in the partitions that answered; partitions {missing} of store {store!r} "
        "did not (rebalancing, restoring, or owner unreachable): retry",
        "missing_partitions": missing,
    }
