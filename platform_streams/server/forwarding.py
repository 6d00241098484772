"""Forward a query to the instance that hosts the data (plain HTTP, stdlib only).

The receiving instance is asked with ``local=true``: it answers from its own stores and
never forwards again, so a stale routing view can cost one extra hop, never a loop.
The caller's bearer token is passed on (all instances of an application share it).
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from platform_streams.query.metadata import HostInfo

__all__ = ["ForwardError", "Forwarded", "forward"]

_TIMEOUT_S = 10.0


class ForwardError(Exception):
    """The other instance could not be reached (or did not answer in time)."""


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The other instance's answer, passed back as it is."""

    status: int
    body: bytes
    content_type: str


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
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return Forwarded(response.status, response.read(), response.headers.get("Content-Type", ""))
    except urllib.error.HTTPError as exc:
        return Forwarded(exc.code, exc.read(), exc.headers.get("Content-Type", "") if exc.headers else "")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise ForwardError(f"{host} did not answer: {exc}") from exc
