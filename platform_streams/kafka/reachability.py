"""Is any bootstrap address accepting connections? A quick answer before librdkafka waits.

Why: against an address where nothing listens, librdkafka retries the connection for the
whole request timeout (10 s for metadata) and then reports "Failed to get metadata: Local:
Broker transport failure", which names neither the address nor what went wrong. A plain
TCP connect answers "is anything there" in milliseconds, for every security protocol (TLS
and SASL start after the TCP handshake), so the first contact of a client with a cluster
checks the bootstrap addresses this way and fails in a few seconds with one line that
says which address refused and why. Only "nothing accepts a connection" fails fast: a
broker that accepts the connection but then does not answer (TLS mismatch, overload) is
left to librdkafka's own timeouts.

A broker that is still starting gets a grace period: the addresses are tried again until
it runs out.
"""

from __future__ import annotations

import socket
import time

from platform_streams.errors import BrokerUnreachableError

__all__ = ["UNREACHABLE_AFTER_S", "bootstrap_addresses", "check_reachable", "unreachable_reason"]

#: how long the bootstrap addresses are retried before the cluster counts as unreachable
UNREACHABLE_AFTER_S = 3.0
_CONNECT_TIMEOUT_S = 1.0
_RETRY_INTERVAL_S = 0.2
_DEFAULT_PORT = 9092


def bootstrap_addresses(servers: str) -> list[tuple[str, int]]:
    """``host:port`` pairs of a ``bootstrap.servers`` value (``PROTOCOL://`` prefixes and
    ``[v6]`` brackets removed, the port defaulting to 9092 as in librdkafka)."""
    addresses: list[tuple[str, int]] = []
    for item in servers.split(","):
        text = item.strip()
        if "://" in text:
            text = text.split("://", 1)[1]
        if not text:
            continue
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port_text = rest.removeprefix(":")
        elif text.count(":") == 1:
            host, _, port_text = text.partition(":")
        else:  # a bare host, or an IPv6 address without brackets (no port)
            host, port_text = text, ""
        try:
            port = int(port_text) if port_text else _DEFAULT_PORT
        except ValueError:
            continue  # librdkafka rejects it with its own message
        addresses.append((host, port))
    return addresses


def _connect_problem(host: str, port: int) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
            return None
    except socket.gaierror as exc:
        return f"cannot resolve {host!r} ({exc.strerror or exc})"
    except TimeoutError:
        return f"no answer within {_CONNECT_TIMEOUT_S:.0f}s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def unreachable_reason(servers: str) -> str | None:
    """None when one of the addresses accepts a TCP connection, else why each did not."""
    problems: list[str] = []
    for host, port in bootstrap_addresses(servers):
        problem = _connect_problem(host, port)
        if problem is None:
            return None
        problems.append(f"{host}:{port} {problem}")
    return "; ".join(problems) if problems else None


def check_reachable(servers: str, within_s: float = UNREACHABLE_AFTER_S) -> None:
    """Return once a bootstrap address accepts a connection; raise
    :class:`BrokerUnreachableError` if none did for ``within_s`` seconds."""
    started = time.monotonic()
    while True:
        reason = unreachable_reason(servers)
        if reason is None:
            return
        waited = time.monotonic() - started
        if waited >= within_s:
            raise BrokerUnreachableError(servers, reason, waited)
        time.sleep(min(_RETRY_INTERVAL_S, within_s - waited))
