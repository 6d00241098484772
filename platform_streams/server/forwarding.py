"""Forward a query to the instance that hosts the data (plain HTTP, stdlib only).

The receiving instance is asked with ``local=true``: it answers from its own stores and
never forwards again, so a stale routing view can cost one extra hop, never a loop.
The caller's bearer token is passed on (all instances of an application share it).

Instances talk to each other directly: the environment's proxy settings (``http_proxy``
and the like, which urllib would otherwise honour) are ignored, so the token never goes to
a proxy, and redirects are never followed (urllib would carry the token to wherever one
points). Only an instance's own answers are passed back -- a 200, or a 404 for a key it
does not have; any other status is a :class:`ForwardError` that names the instance and the
status, never the upstream's body (which may be a proxy's page or anything else) -- of a
503 only two typed fields are read: why it refused (its copy is restoring or too far
behind) and its lag in records.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import orjson

from platform_streams.query.metadata import HostInfo

__all__ = ["LAG_HEADER", "ForwardError", "Forwarded", "forward"]

_TIMEOUT_S = 10.0
#: the response header saying how many records behind the answering copy is
LAG_HEADER = "X-Streams-Lag"
#: what another instance answers to a query it could serve (a 404 is a key it does not have)
_ANSWERS = frozenset({200, 404})


class ForwardError(Exception):
    """The other instance could not be reached, did not answer in time, or failed.

    ``reason`` and ``lag``: an instance that refused a query because its copy of the
    partition is restoring, or further behind than the caller's bound, says so in two
    fields of its 503 (``"restoring"`` or ``"lag"``, and the lag in records); only those
    two, checked for their type, are read from its body.
    """

    def __init__(self, message: str, reason: str | None = None, lag: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.lag = lag


_REASONS = frozenset({"restoring", "lag"})


def _refusal(body: bytes) -> tuple[str | None, int | None]:
    """``(reason, lag)`` of another instance's 503 refusal, (None, None) if it is not one."""
    try:
        document = orjson.loads(body[:4096])
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(document, dict) or document.get("reason") not in _REASONS:
        return None, None
    lag = document.get("lag")
    return str(document["reason"]), lag if type(lag) is int and lag >= 0 else None


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The other instance's answer, passed back as it is."""

    status: int
    body: bytes
    content_type: str
    #: how many records behind the copy that answered is (``X-Streams-Lag``), None if not said
    lag: int | None = None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx itself is then raised as an HTTPError


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def _lag(headers: Any) -> int | None:
    text = headers.get(LAG_HEADER) if headers is not None else None
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() else None


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def forward(
    host: HostInfo, path: str, params: dict[str, str], token: str | None, timeout_s: float = _TIMEOUT_S
) -> Forwarded:
    """GET ``path`` (already percent-encoded) on ``host`` with ``params`` plus ``local=true``."""
    query = urllib.parse.urlencode({**params, "local": "true"})
    bracketed = f"[{host.host}]" if ":" in host.host else host.host
    url = f"http://{bracketed}:{host.port}{path}?{query}"
    request = urllib.request.Request(url, method="GET")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            headers = response.headers
            return Forwarded(response.status, response.read(), headers.get("Content-Type", ""), _lag(headers))
    except urllib.error.HTTPError as exc:
        with exc:
            if exc.code not in _ANSWERS:
                why, lag = _refusal(exc.read()) if exc.code == 503 else (None, None)
                said = f" ({why}, lag {lag})" if why is not None else ""
                raise ForwardError(f"instance {host} answered HTTP {exc.code}{said}", why, lag) from None
            headers = exc.headers
            return Forwarded(
                exc.code, exc.read(), headers.get("Content-Type", "") if headers else "", _lag(headers)
            )
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ForwardError(f"instance {host} did not answer: {_one_line(reason)}") from exc
