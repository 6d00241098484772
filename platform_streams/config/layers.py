"""The named layers of a configuration, and the checks that must name the layer.

Why a module of its own: :mod:`platform_streams.config.sources` translates what operators
write into field names and validates nothing; the model validates values once, after the
layers are merged -- when it is too late to say which layer a bad key came from. Keys the
model cannot judge, the pass-through librdkafka properties (``security.protocol``,
``consumer.fetch.min.bytes``), are checked here per layer, by librdkafka itself
(:mod:`platform_streams.kafka.properties`), so that ``num.stream.thread`` in a ``--set``
fails at load time as "'num.stream.thread' in --set overrides: no such setting ...; did
you mean 'num.stream.threads'?" instead of failing the first client inside ``start()``.

Like config_sources, this module does not import the model: callers pass the field names.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from platform_streams.config.secret_keys import remember_settings
from platform_streams.config.sources import (
    CLIENT_FIELDS,
    CLIENT_PREFIXES,
    Origins,
    closest,
    env_values,
    normalize,
    read_file,
    setting_names,
)
from platform_streams.errors import StreamsConfigError
from platform_streams.kafka.properties import ClientRole, client_property_problem, known_property_names

__all__ = ["ENV_PREFIX", "Layers", "client_key_problem", "named_layers"]

ENV_PREFIX = "PLATFORM_STREAMS_"

_CLIENT_ROLES: dict[str, ClientRole] = {
    "client_config": "client",
    "consumer_config": "consumer",
    "producer_config": "producer",
    "admin_config": "admin",
}
#: the SASL mechanisms librdkafka implements (``sasl.mechanism(s)``): it takes any string and
#: fails only when the first client authenticates; it compares case-sensitively, as Java does
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: a config assembled from named layers, lowest first: ``[("config file 'x.yaml'", {...}), ...]``
Layers = list[tuple[str, dict[str, Any]]]


def client_key_problem(
    field: str, key: str, value: Any, spelled: str | None = None, *, fields: Collection[str] = ()
) -> str | None:
    """Why librdkafka rejects pass-through property ``key=value`` of client dict ``field``, or None.

    ``spelled`` is how the user wrote it (``consumer.auto.offset.rest``): the suggestion
    keeps its routing prefix. An unprefixed key may also be a misspelt setting of
    ``fields`` (the model's field names), so those are candidates too.
    """
    if key in ("sasl.mechanism", "sasl.mechanisms") and value not in SASL_MECHANISMS:
        return f"must be one of {', '.join(SASL_MECHANISMS)}, got {value!r}"
    problem = client_property_problem(_CLIENT_ROLES[field], key, value)
    if problem != "unknown":
        return problem
    spelled = spelled or key
    prefix = spelled[: -len(key)] if spelled.endswith(key) else ""
    prefix = prefix if prefix in CLIENT_PREFIXES else ""
    candidates = set(known_property_names())
    if not prefix:
        candidates |= set(setting_names(fields))
    match = closest(key, candidates)
    hint = f"; did you mean {prefix + match!r}?" if match else ""
    return f"no such setting (neither platform_streams nor librdkafka knows it){hint}"


def _check_layer(name: str, data: Mapping[str, Any], origins: Origins, fields: Collection[str]) -> None:
    """Reject pass-through client properties librdkafka does not take, naming the layer."""
    problems = []
    for field in CLIENT_FIELDS:
        values = data.get(field)
        if not isinstance(values, Mapping):
            continue
        for key, value in values.items():
            if not isinstance(key, str):
                continue  # the model names that error
            spelled = origins.get((field, key), f"{field}.{key}")
            problem = client_key_problem(field, key, value, spelled, fields=fields)
            if problem is not None:
                problems.append(f"{spelled!r} in {name}: {problem}")
    if problems:
        raise StreamsConfigError("; ".join(problems))


def named_layers(
    path: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None,
    defaults: Mapping[str, Any] | None,
    fields: Collection[str],
) -> Layers:
    """The app factory's settings, the file, ``PLATFORM_STREAMS_*``, the overrides: each
    normalized to ``fields`` and checked (module docstring), lowest first."""
    raw: list[tuple[str, Mapping[str, Any]]] = [("the app factory's settings", defaults or {})]
    if path is not None:
        raw.append((f"config file {str(path)!r}", read_file(Path(path))))
    raw.append((f"{ENV_PREFIX}* environment variables", env_values(env, ENV_PREFIX, fields)))
    raw.append(("--set overrides", overrides or {}))
    out: Layers = []
    for name, values in raw:
        origins: Origins = {}
        remember_settings(values)  # before any check can quote them (config/secret_keys.py)
        data = normalize(values, fields, origins)
        _check_layer(name, data, origins, fields)
        out.append((name, data))
    return out
