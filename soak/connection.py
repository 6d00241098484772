"""The soak's Kafka connection: the bootstrap servers plus the security settings of the
environment, for every client the harness itself makes (producer, checkers, admin).

The security settings come from ``PLATFORM_STREAMS_CLIENT_CONFIG`` (JSON, e.g.
``{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username":
..., "sasl.password": ..., "ssl.ca.location": ...}``), the variable the workers read as
well (they inherit the environment). Never from the command line: a password there shows
in ``ps`` and would be printed in the replay line.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["CLIENT_CONFIG_ENV", "client_conf", "client_settings"]

CLIENT_CONFIG_ENV = "PLATFORM_STREAMS_CLIENT_CONFIG"


def client_settings() -> dict[str, Any]:
    """The librdkafka settings of ``$PLATFORM_STREAMS_CLIENT_CONFIG`` ({} when unset)."""
    raw = os.environ.get(CLIENT_CONFIG_ENV, "").strip()
    if not raw:
        return {}
    try:
        settings = json.loads(raw)
    except json.JSONDecodeError as exc:  # the message must not quote the value: it holds secrets
        where = f"line {exc.lineno}, column {exc.colno}"
        raise SystemExit(f"soak: {CLIENT_CONFIG_ENV} is not JSON ({where})") from None
    if not isinstance(settings, dict):
        raise SystemExit(f"soak: {CLIENT_CONFIG_ENV} must be a JSON object of librdkafka settings")
    return {str(k): v for k, v in settings.items() if k != "bootstrap.servers"}


def client_conf(bootstrap: str) -> dict[str, Any]:
    """``bootstrap.servers`` plus the environment's security settings."""
    return {"bootstrap.servers": bootstrap, **client_settings()}
