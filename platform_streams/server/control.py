"""Connect-style control of one client over its HTTP endpoint: status, pause, resume, restart.

Kafka Connect lets an operator pause, resume and restart a connector through its REST API
without redeploying anything; the platform (Dagster jobs, scripts) does the same with a
stream application's instances::

    GET        /control/status     state, paused, workers (thread, state, tasks)
    PUT|POST   /control/pause      KafkaStreams.pause(): stop processing, keep the partitions
    PUT|POST   /control/resume     KafkaStreams.resume()
    POST       /control/restart    replace every stream worker (202; poll status to follow)

Control needs the endpoint's bearer token when one is set (like every path but
``/health/*``); the routes module checks it before calling :func:`handle_control`.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from platform_streams.errors import IllegalStateError

if TYPE_CHECKING:
    from platform_streams.kafka_streams import KafkaStreams

__all__ = ["control_status", "handle_control"]

log = logging.getLogger(__name__)

_WRITE = frozenset({"PUT", "POST"})


def control_status(streams: KafkaStreams) -> dict[str, Any]:
    """What ``GET /control/status`` answers (also the body of every control answer)."""
    return {
        "application_id": streams.config.application_id,
        "client_id": streams.config.effective_client_id,
        "state": streams.state().value,
        "paused": streams.is_paused(),
        "workers": [
            {
                "thread_id": w.name,
                "state": w.state.value,
                "active_tasks": sorted(str(t) for t in list(w.tasks)),
            }
            for w in list(streams.workers)
        ],
    }


def _restart(streams: KafkaStreams) -> None:
    try:
        stopped = streams.restart_workers()
        if not stopped:
            log.warning("restart: an old stream worker did not stop in time")
    except IllegalStateError as exc:
        log.warning("restart refused: %s", exc)
    except Exception:
        log.exception("restart of the stream workers failed")


def handle_control(streams: KafkaStreams, method: str, action: str) -> tuple[int, dict[str, Any]]:
    """Answer one control request: ``(HTTP status, JSON document)``."""
    if action == "status":
        if method != "GET":
            return 405, {"error": f"use GET for /control/status, not {method}"}
        return 200, control_status(streams)
    if action not in ("pause", "resume", "restart"):
        return 404, {"error": f"no such control action: {action!r} (status, pause, resume, restart)"}
    if method not in _WRITE:
        return 405, {"error": f"use PUT or POST for /control/{action}, not {method}"}
    if not streams.state().is_running_or_rebalancing():
        return 409, {
            "error": f"the client is {streams.state().value}: nothing to {action}",
            **control_status(streams),
        }
    if action == "pause":
        streams.pause()
    elif action == "resume":
        streams.resume()
    else:
        # Stopping workers waits for their final commit: answer at once, work in the background.
        threading.Thread(
            target=_restart, args=(streams,), name="streams-control-restart", daemon=True
        ).start()
        return 202, {"restarting": True, **control_status(streams)}
    log.info("control: %s", action)
    return 200, control_status(streams)
