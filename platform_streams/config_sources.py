"""Where ``StreamsConfig`` settings come from: Java-style keys, files and the environment.

Kept apart from the model so that :mod:`platform_streams.config` reads as the list of
settings and their rules, and this module as the translation of what operators already
have -- a Java ``streams.properties`` file, a YAML file, ``PLATFORM_STREAMS_*`` variables
-- into field names. Nothing here validates values: the model does that once, after the
layers are merged, so an error names the field whatever layer supplied it.

This module does not import the model (the model imports it): callers pass the field
names in.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from platform_streams.errors import StreamsConfigError

__all__ = ["CLIENT_FIELDS", "env_values", "merge", "normalize", "read_file"]

# The model's logger: the warnings are about its settings, wherever the parsing lives.
_log = logging.getLogger("platform_streams.config")

# Dotted Java keys whose snake_case form is not the field name.
_ALIASES: dict[str, str] = {
    "cache.max.bytes.buffering": "statestore_cache_max_bytes",
    "default.deserialization.exception.handler": "deserialization_exception_handler",
    "default.processing.exception.handler": "processing_exception_handler",
    "processing.exception.handler": "processing_exception_handler",
    "default.production.exception.handler": "production_exception_handler",
    "production.exception.handler": "production_exception_handler",
}
# Deprecated aliases lose to their replacement when both are given (Java semantics).
_DEPRECATED = frozenset({"cache.max.bytes.buffering"})

# Longest prefix first: ``main.consumer.x`` must not be routed as ``consumer.``.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("main.consumer.", "consumer_config"),
    ("restore.consumer.", "consumer_config"),
    ("global.consumer.", "consumer_config"),
    ("consumer.", "consumer_config"),
    ("producer.", "producer_config"),
    ("admin.", "admin_config"),
)
#: the per-client librdkafka dicts: merged key by key, never flattened, JSON in the environment
CLIENT_FIELDS = ("client_config", "consumer_config", "producer_config", "admin_config")

# Java Streams settings with no equivalent here. Passing them to librdkafka would make
# client creation fail far from the config file, so they are dropped with a warning.
_UNSUPPORTED_JAVA_KEYS = frozenset(
    """default.timestamp.extractor default.dsl.store dsl.store.suppliers.class rocksdb.config.setter
    upgrade.from built.in.metrics.version state.cleanup.delay.ms window.size.ms windowed.inner.class.serde
    windowstore.changelog.additional.retention.ms repartition.purge.interval.ms task.assignor.class
    rack.aware.assignment.strategy rack.aware.assignment.tags client.tag default.client.supplier
    enable.metrics.push default.windowed.key.serde.inner default.windowed.value.serde.inner
    metrics.num.samples metrics.sample.window.ms metric.reporters""".split()  # noqa: SIM905
)


def normalize(raw: Mapping[str, Any], fields: Collection[str]) -> dict[str, Any]:
    """Route dotted / snake_case keys of a Java-style mapping to the config ``fields``."""
    out: dict[str, Any] = {}
    explicit: set[str] = set()
    for raw_key, value in _flatten(raw):
        key = raw_key.strip()
        field = _ALIASES.get(key) or key.replace(".", "_").replace("-", "_")
        if field in fields:
            if field in CLIENT_FIELDS and isinstance(value, Mapping):
                out.setdefault(field, {}).update({str(k): v for k, v in value.items()})
            elif key not in _DEPRECATED or field not in explicit:
                out[field] = value
                if key not in _DEPRECATED:
                    explicit.add(field)
            continue
        if key in _UNSUPPORTED_JAVA_KEYS:
            _log.warning("ignoring Kafka Streams setting %r: not supported by platform_streams", key)
            continue
        target, stripped = "client_config", key
        for prefix, dict_field in _PREFIXES:
            if key.startswith(prefix):
                target, stripped = dict_field, key[len(prefix) :]
                break
        out.setdefault(target, {})[stripped] = value
    return out


def _flatten(raw: Mapping[str, Any], parent: str = "") -> list[tuple[str, Any]]:
    """Flatten nested YAML mappings to dotted keys, except the values of client dict fields."""
    items: list[tuple[str, Any]] = []
    for key, value in raw.items():
        full = f"{parent}.{key}" if parent else str(key)
        if isinstance(value, Mapping) and full.replace(".", "_") not in CLIENT_FIELDS:
            items.extend(_flatten(value, full))
        else:
            items.append((full, value))
    return items


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay ``over`` on ``base``; the client dicts are merged key by key."""
    out = dict(base)
    for key, value in over.items():
        if key in CLIENT_FIELDS and isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


#: The one name of the bootstrap variable: the CLI and workers (StreamsConfig's
#: ``bootstrap_servers``), the Dagster code location, the demo and the test suite all read it.
BOOTSTRAP_ENV = "PLATFORM_STREAMS_BOOTSTRAP_SERVERS"
#: Its former name in the Dagster code location, demo and tests: refused, never half-read.
RENAMED_ENV = {"PLATFORM_STREAMS_BOOTSTRAP": BOOTSTRAP_ENV}


def check_renamed_env(env: Mapping[str, str]) -> None:
    """Refuse a variable under its former name (it would be silently ignored)."""
    for old, new in RENAMED_ENV.items():
        if env.get(old) and not env.get(new):
            raise StreamsConfigError(f"{old} was renamed {new}: set {new}={env[old]} instead")


def env_values(env: Mapping[str, str], prefix: str, fields: Collection[str]) -> dict[str, Any]:
    """``<prefix>APPLICATION_ID=x`` -> ``{"application_id": "x"}``; client dicts as JSON."""
    check_renamed_env(env)
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(prefix):
            continue
        field = name[len(prefix) :].lower()
        if field not in fields:
            continue
        if field in CLIENT_FIELDS:
            try:
                out[field] = json.loads(value)
            except ValueError as exc:
                raise StreamsConfigError(f"{name} must be a JSON object: {exc}") from exc
        else:
            out[field] = value
    return out


def read_file(path: Path) -> Mapping[str, Any]:
    """Read a ``.yaml``/``.yml`` or Java ``.properties`` file into a flat-ish mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StreamsConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    if path.suffix.lower() not in (".yaml", ".yml"):
        return _parse_properties(text)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StreamsConfigError(f"invalid YAML in config file {str(path)!r}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise StreamsConfigError(f"config file {str(path)!r} must contain a mapping at the top level")
    return data


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)


def _unescape(text: str) -> str:
    """Apply Java properties escapes: ``\\t``, ``\\n``, ``\\uXXXX``, ``\\x`` -> ``x``."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPES.get(code, code)

    return _ESCAPE_RE.sub(one, text)


_ENTRY_RE = re.compile(r"((?:\\.|[^=:\s\\])+)\s*[=:]?\s*(.*)$", re.DOTALL)


def _parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``#``/``!`` comments, ``=``/``:``/space separators,
    backslash line continuations and escapes; keys and values are trimmed."""
    entries: list[str] = []
    pending: list[str] = []
    for physical in text.splitlines():
        line = physical.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # odd backslashes: line continues
            pending.append(line[:-1])
            continue
        entries.append("".join([*pending, line]))
        pending = []
    if pending:
        entries.append("".join(pending))
    result: dict[str, str] = {}
    for entry in entries:
        match = _ENTRY_RE.match(entry)
        if match:
            result[_unescape(match.group(1))] = _unescape(match.group(2)).strip()
    return result
