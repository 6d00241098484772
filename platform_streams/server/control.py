"""Connect-style control of one client over its HTTP endpoint: status, pause, resume, restart.

Kafka Connect lets an operator pause, resume and restart a connector through its REST API
without redeploying anything; the platform (Dagster jobs, scripts) does the same with a
stream application's instances::

    GET        /control/status     state, paused, workers (thread, state, tasks)
    PUT|POST   /control/pause      KafkaStreams.pause(): stop processing, keep the partitions
    PUT|POST   /control/resume     KafkaStreams.resume()
    POST       /control/restart    replace every stream worker (202; poll status to follow;
                                   409 while a restart of this client is still under way)

Control needs the endpoint's bearer token when one is set (like every path but
``/health/*``); the routes module checks it before calling :func:`handle_control`.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any

from platform_streams.errors import IllegalStateError

if TYPE_CHECKING:
    from platform_streams.kafka_streams import KafkaStreams

__all__ = ["control_status", "handle_control"]

log = logging.getLogger(__name__)

_WRITE = frozenset({"PUT", "POST"})

# The clients with a restart under way: requests for another one coalesce into it (409)
# rather than each stopping the same workers and tripping over the others' replacements.
_restarts_lock = threading.Lock()
_restarting: weakref.WeakSet[KafkaStreams] = weakref.WeakSet()


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
        if stopped:
            log.info("control: restart done, the stream workers were replaced")
        else:
            log.warning("restart: an old stream worker did not stop in time")
    except IllegalStateError as exc:
        log.warning("restart refused: %s", exc)
    except Exception as exc:
        log.exception("restart of the stream workers failed: %s: %s", type(exc).__name__, exc)
    finally:
        with _restarts_lock:
            _restarting.discard(streams)


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
        with _restarts_lock:
            if streams in _restarting:
                return 409, {
                    "error": "a restart is already under way: follow it on /control/status",
                    "restarting": True,
                    **control_status(streams),
                }
            _restarting.add(streams)
        # Stopping workers waits for their final commit: answer at once, work in the background.
        try:
            threading.Thread(
                target=_restart, args=(streams,), name="streams-control-restart", daemon=True
            ).start()
        except BaseException:
            with _restarts_lock:
                _restarting.discard(streams)
            raise
        log.info("control: restart")
        return 202, {"restarting": True, **control_status(streams)}
    log.info("control: %s", action)
    return 200, control_status(streams)
