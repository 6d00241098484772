"""Which copy answers a key query: the running active, or -- when the caller accepts
staleness -- a standby or a restoring active within the caller's bound (KIP-535).

The caller bounds staleness in records with ``max_lag=N`` (Kafka's ``enableStaleStores``
plus a filter on ``LagInfo#offsetLag``, as KIP-535's examples do on the client side).
Without it only the running active task answers, here or forwarded to its owner; a key
whose active is restoring is then a 503 naming the owner and how far behind it is, never a
partial store read as if it were the answer. With it, in order:

1. the running active (here, or its owner asked with the bound stripped, so it answers
   fresh or says it is restoring, and how far behind);
2. a standby within the bound: this instance's, else each standby host's (asked with
   ``local=true`` and the bound: it answers from its own copy or refuses);
3. the restoring active within the bound (a restore is usually the copy furthest behind:
   standbys first).

Every answer says how stale it is: ``"stale"`` and ``"lag"`` (records) in the body, the lag
also in ``X-Streams-Lag``. A copy whose lag cannot be known (its changelog's end offset did
not come) never answers a bounded query.

A forwarded request (``local=true``) answers only from this instance: the running active;
with a bound, its standby or restoring copy within it; else a 503 whose ``reason`` is
``restoring`` or ``lag`` and whose ``lag`` is this copy's, which the asking instance reads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from platform_streams.query.lags import ReplicaLag, Role
from platform_streams.query.metadata import HostInfo
from platform_streams.query.request import StateQueryRequest
from platform_streams.server.codec import parse_number
from platform_streams.server.forwarding import ForwardError

if TYPE_CHECKING:
    from platform_streams.server.routes import Api, Response

__all__ = ["MAX_LAG", "answer_key", "max_lag_of"]

log = logging.getLogger(__name__)

MAX_LAG = "max_lag"
_MAX = 2**63 - 1


class Refused(Exception):
    """Ends a key query with ``status`` and a JSON error (``reason``/``lag`` when known)."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


def max_lag_of(params: dict[str, str]) -> int | None:
    """The caller's staleness bound in records, None if it accepts none (raises ValueError
    naming the parameter)."""
    if "max_staleness_ms" in params:
        raise ValueError(
            "max_staleness_ms is not supported: bound staleness in records with max_lag "
            "(a copy's lag is measured in changelog offsets, as Kafka's LagInfo)"
        )
    if params.get("require_active", "").strip().lower() in ("1", "true", "yes"):
        return None
    return parse_number(params.get(MAX_LAG), MAX_LAG, 0, _MAX)


def answer_key(
    api: Api,
    store: str,
    key: Any,
    path: str,
    partition: int,
    request: StateQueryRequest,
    params: dict[str, str],
    *,
    window: bool,
    bound: int | None,
) -> Response:
    """Answer a key query of a murmur2-placed store (see the module docstring)."""
    service = api._streams.interactive_queries
    here = service.host
    answer = api._local(request.require_active(), partition)
    if answer is not None:
        return api._key_answer(store, key, partition, answer, window, lag=None)
    memo: list[ReplicaLag | None] = []

    def mine() -> ReplicaLag | None:
        """This instance's copy of the partition with its lag (asked once: a broker call)."""
        if not memo:
            copies = service.local_lags(store, partition)
            memo.append(copies[0] if copies else None)
        return memo[0]

    def role_here() -> Role | None:
        """What this instance's copy of the partition is (no broker call)."""
        copies = service.local_replicas(store, partition)
        return copies[0].role if copies else None

    def local_within(roles: tuple[Role, ...]) -> Response | None:
        if bound is None or role_here() not in roles:
            return None
        copy = mine()
        if copy is None or copy.role not in roles or copy.offset_lag > bound:
            return None
        stale = api._local(request, partition)
        if stale is None:
            return None
        return api._key_answer(store, key, partition, stale, window, lag=copy.offset_lag)

    what = f"partition {partition} of store {store!r}"
    if params.get("local", "").strip().lower() in ("1", "true", "yes"):
        found = local_within((Role.STANDBY, Role.RESTORING))
        if found is not None:
            return found
        role = role_here()
        copy = mine() if role is Role.RESTORING or (role is not None and bound is not None) else None
        if role is Role.RESTORING and bound is None:
            lag = copy.offset_lag if copy is not None else None
            raise Refused(
                503,
                f"{what}: its active task on {here} is {_restoring(lag)}",
                reason="restoring",
                lag=lag,
                partition=partition,
                store=store,
            )
        if copy is not None and bound is not None and copy.role is not Role.ACTIVE:
            raise Refused(
                503,
                f"{what}: the {copy.role.value} copy here is {copy.offset_lag} records behind, beyond "
                f"max_lag={bound}",
                reason="lag",
                lag=copy.offset_lag,
                partition=partition,
                store=store,
            )
        raise Refused(
            503,
            f"{what} is not available here (rebalancing, restoring, or moved): retry",
            partition=partition,
            store=store,
        )

    meta = api._run(lambda: service.query_metadata_for_key(store, key))
    owner = meta.active_host
    #: the owner is restoring: (its lag in records, None if not known yet)
    restoring: tuple[int | None] | None = None
    failed: ForwardError | None = None
    fresh_only = {k: v for k, v in params.items() if k != MAX_LAG}
    if owner.is_available() and owner != here:
        try:
            return api._relay(owner, path, fresh_only)
        except ForwardError as exc:
            if exc.reason == "restoring":
                restoring = (exc.lag,)
            else:
                log.warning("forwarding a query for %s to %s failed: %s", store, owner, exc)
                failed = exc
    elif owner.is_available() and role_here() is Role.RESTORING:
        copy = mine()
        restoring = (copy.offset_lag if copy is not None else None,)
    if bound is not None:
        found = local_within((Role.STANDBY,))
        if found is not None:
            return found
        for standby in sorted(meta.standby_hosts - {owner, *([here] if here else [])}):
            try:
                return api._relay(standby, path, {**params, MAX_LAG: str(bound)})
            except ForwardError as exc:
                log.info("standby %s did not answer %s within max_lag=%d: %s", standby, what, bound, exc)
        found = local_within((Role.RESTORING,))
        if found is not None:
            return found
        if restoring is not None and owner != here and restoring[0] is not None and restoring[0] <= bound:
            try:
                return api._relay(owner, path, {**params, MAX_LAG: str(bound)})
            except ForwardError as exc:
                log.info("restoring owner %s did not answer %s: %s", owner, what, exc)
    if restoring is not None:
        lag = restoring[0]
        advice = (
            f"no standby or restoring copy is within max_lag={bound}"
            if bound is not None
            else "pass max_lag=<records> to accept a standby or the restoring copy"
        )
        raise Refused(
            503,
            f"{what}: its active task on {owner} is {_restoring(lag)}; {advice}",
            reason="restoring",
            lag=lag,
            partition=partition,
            store=store,
            active_host=str(owner),
            standby_hosts=_hosts(meta.standby_hosts),
        )
    if failed is not None:
        # the owner's failure, in one line naming it: never what it (or a proxy) sent
        raise Refused(
            502, f"forwarding the query for {what} failed: {failed}", store=store, partition=partition
        )
    raise Refused(
        503,
        f"{what} is not available (rebalancing, restoring, or its owner is unreachable): retry"
        + ("" if bound is not None else "; pass max_lag=<records> to accept a standby's answer"),
        store=store,
        partition=partition,
    )


def _restoring(lag: int | None) -> str:
    if lag is None:
        return "restoring (how far behind is not known yet)"
    return f"restoring, {lag} records behind"


def _hosts(hosts: frozenset[HostInfo]) -> list[str]:
    return sorted(str(h) for h in hosts)
