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

import difflib
import json
import logging
import re
from collections.abc import Collection, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from platform_streams.config.secret_keys import is_secret_key, remember, remember_settings, remember_text
from platform_streams.errors import StreamsConfigError

__all__ = [
    "CLIENT_FIELDS",
    "CLIENT_PREFIXES",
    "NOT_SETTINGS",
    "Origins",
    "closest",
    "env_values",
    "merge",
    "normalize",
    "read_file",
    "setting_names",
    "yaml_problem",
]

# The model's logger: the warnings are about its settings, wherever the parsing lives.
_log = logging.getLogger("platform_streams.config")

# Non-client fields whose environment value is JSON (KIP-708 tags: the Helm chart sets them).
_JSON_FIELDS = frozenset({"client_tags", "rack_aware_assignment_tags"})

# Dotted Java keys whose snake_case form is not the field name.
_ALIASES: dict[str, str] = {
    "cache.max.bytes.buffering": "statestore_cache_max_bytes",
    "default.deserialization.exception.handler": "deserialization_exception_handler",
    "default.processing.exception.handler": "processing_exception_handler",
    "processing.exception.handler": "processing_exception_handler",
    "default.production.exception.handler": "production_exception_handler",
    "production.exception.handler": "production_exception_handler",
    "dsl.store.suppliers.class": "dsl_store_suppliers",
    # Kafka's StreamsConfig.InternalConfig keys (dunder-named, private API)
    "__emit.interval.ms.kstreams.windowed.aggregation__": "emit_interval_ms_kstreams_windowed_aggregation",
    "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__": (
        "emit_interval_ms_kstreams_outer_join_spurious_results_fix"
    ),
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
#: key prefixes that route a property to one client's dict (``consumer.fetch.min.bytes``)
CLIENT_PREFIXES = frozenset(prefix for prefix, _ in _PREFIXES)
#: the per-client librdkafka dicts: merged key by key, never flattened, JSON in the environment
CLIENT_FIELDS = ("client_config", "consumer_config", "producer_config", "admin_config")

#: ``PLATFORM_STREAMS_<suffix>`` variables that other parts read and that are not settings
#: (env_values accepts them): the test/bench broker, the Helm chart's app plugin, Dagster's
#: resources and deployments, Spark. A new one must be added here (and to the README).
NOT_SETTINGS = frozenset(
    {
        "BOOTSTRAP",  # the alias of BOOTSTRAP_SERVERS (apply_bootstrap_alias)
        "BROKERS",  # tests: which broker kinds to run on (LOCAL_BROKER_KINDS)
        "TEST_SIDE",  # tests: which side of the suite this pytest process runs (make test)
        "KAFKA_POM",  # kafka/: the pom listing Apache Kafka's jars
        "APP",  # apps.py: the app plugin a Helm pod runs
        "APP_CONFIG",  # apps.py: that plugin's configuration
        "DEPLOY_DIR",  # dagster_defs: where local deployments live
        "DEPLOY_TARGET",  # dagster_defs: local or kubernetes
        "DAGSTER_APPS",  # dagster_defs: extra app YAML directory
        "GRAFANA_URL",  # dagster_defs: Grafana's address, linked from the app asset
        "SECURITY_PROTOCOL",  # dagster_defs: the Kafka resource
        "SASL_MECHANISM",
        "SASL_USERNAME",
        "SASL_PASSWORD",
        "SPARK_MASTER",  # ops/spark: the Spark master URL
        "SPARK_KAFKA_READER",  # Spark jobs: which Kafka reader (ops/spark/kafka_source.py)
        "SPARK_KAFKA_JARS",  # Spark jobs: where the Kafka connector jars are cached
    }
)
# Kubernetes injects <SERVICE>_SERVICE_HOST, <SERVICE>_PORT_8080_TCP... for every Service of
# the namespace: a Service named platform-streams(-x) would otherwise break every pod.
_SERVICE_LINK = re.compile(
    r"(?:[A-Z0-9_]+_)?(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|PORT(?:_\d+_[A-Z]+(?:_[A-Z]+)?)?)"
)

# Java Streams settings with no equivalent here. Passing them to librdkafka would make
# client creation fail far from the config file, so they are dropped with a warning.
_UNSUPPORTED_JAVA_KEYS = frozenset(
    """default.timestamp.extractor
    upgrade.from built.in.metrics.version state.cleanup.delay.ms window.size.ms windowed.inner.class.serde
    windowstore.changelog.additional.retention.ms task.assignor.class
    client.tag default.client.supplier
    enable.metrics.push default.windowed.key.serde.inner default.windowed.value.serde.inner
    metrics.num.samples metrics.sample.window.ms metric.reporters""".split()  # noqa: SIM905
)


#: where each pass-through client property came from: (client dict field, property) -> the
#: key as the layer spelled it (``consumer.auto.offset.reset``), for error messages
Origins = dict[tuple[str, str], str]


def _route(key: str, fields: Collection[str]) -> tuple[str, str | None] | None:
    """``(field, None)`` for a setting, ``(client dict field, property)`` for a pass-through,
    None for a Java Streams setting that is dropped (:data:`_UNSUPPORTED_JAVA_KEYS`)."""
    field = _ALIASES.get(key) or key.replace(".", "_").replace("-", "_")
    if field in fields:
        return field, None
    if key in _UNSUPPORTED_JAVA_KEYS:
        return None
    for prefix, dict_field in _PREFIXES:
        if key.startswith(prefix):
            return dict_field, key[len(prefix) :]
    return "client_config", key


def normalize(
    raw: Mapping[str, Any], fields: Collection[str], origins: Origins | None = None
) -> dict[str, Any]:
    """Route dotted / snake_case keys of a Java-style mapping to the config ``fields``.

    ``origins`` (when given) records how each pass-through client property was spelled.
    """
    out: dict[str, Any] = {}
    explicit: set[str] = set()
    seen = origins if origins is not None else {}
    for raw_key, value in _flatten(raw):
        key = raw_key.strip()
        routed = _route(key, fields)
        if routed is None:
            _log.warning("ignoring Kafka Streams setting %r: not supported by platform_streams", key)
            continue
        field, client_key = routed
        if client_key is not None:
            out.setdefault(field, {})[client_key] = value
            seen[(field, client_key)] = key
        elif field in CLIENT_FIELDS and isinstance(value, Mapping):
            out.setdefault(field, {}).update({str(k): v for k, v in value.items()})
            seen.update({(field, str(k)): f"{key}.{k}" for k in value})
        elif key not in _DEPRECATED or field not in explicit:
            out[field] = value
            if key not in _DEPRECATED:
                explicit.add(field)
    return out


def setting_names(fields: Collection[str]) -> list[str]:
    """Every spelling of a setting a layer may use: field names, Java keys, aliases."""
    names = {*fields, *(f.replace("_", ".") for f in fields), *_ALIASES}
    return sorted(names - set(CLIENT_FIELDS))


def closest(name: str, candidates: Collection[str]) -> str | None:
    """The candidate ``name`` most likely is a typo of, or None."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return matches[0] if matches else None


def _flatten(raw: Mapping[str, Any], parent: str = "") -> list[tuple[str, Any]]:
    """Flatten nested YAML mappings to dotted keys, except the values of dict-valued fields
    (client dicts, ``client_tags``)."""
    items: list[tuple[str, Any]] = []
    for key, value in raw.items():
        full = f"{parent}.{key}" if parent else str(key)
        dict_valued = full.replace(".", "_") in CLIENT_FIELDS or full in _JSON_FIELDS
        if isinstance(value, Mapping) and not dict_valued:
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


#: The bootstrap variable: StreamsConfig's ``bootstrap_servers`` (the CLI and workers), the
#: Dagster code location, the demo and the test suite all read it.
BOOTSTRAP_ENV = "PLATFORM_STREAMS_BOOTSTRAP_SERVERS"
#: The short name the developers' guide and earlier releases use: read as the same setting
#: wherever BOOTSTRAP_ENV is not set (never a second, diverging value: both set and different
#: is an error).
BOOTSTRAP_ALIAS = "PLATFORM_STREAMS_BOOTSTRAP"


def apply_bootstrap_alias(env: MutableMapping[str, str]) -> None:
    """Copy :data:`BOOTSTRAP_ALIAS` into :data:`BOOTSTRAP_ENV` when only the alias is set, so
    every reader (``dg.EnvVar``, worker processes, tests) sees the one variable."""
    alias, canonical = env.get(BOOTSTRAP_ALIAS, "").strip(), env.get(BOOTSTRAP_ENV, "").strip()
    if alias and canonical and alias != canonical:
        raise StreamsConfigError(
            f"{BOOTSTRAP_ALIAS}={alias!r} and {BOOTSTRAP_ENV}={canonical!r} disagree: set one of them"
        )
    if alias and not canonical:
        env[BOOTSTRAP_ENV] = alias


def env_values(env: Mapping[str, str], prefix: str, fields: Collection[str]) -> dict[str, Any]:
    """``<prefix>APPLICATION_ID=x`` -> ``{"application_id": "x"}``; client dicts as JSON.

    A ``<prefix>*`` variable that is neither a setting nor in :data:`NOT_SETTINGS` (nor a
    Kubernetes service link) is an error naming the closest setting: a misspelt
    ``PLATFORM_STREAMS_NUM_STREAM_THREAD`` must not silently leave the default in place.
    """
    env = dict(env)
    apply_bootstrap_alias(env)
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in env.items():
        if not name.startswith(prefix):
            continue
        field = name[len(prefix) :].lower()
        if is_secret_key(name):  # PLATFORM_STREAMS_HTTP_AUTH_TOKEN, PLATFORM_STREAMS_SASL_PASSWORD
            remember(value)
        if field not in fields:
            suffix = name[len(prefix) :]
            if suffix not in NOT_SETTINGS and not _SERVICE_LINK.fullmatch(suffix):
                unknown.append(name)
            continue
        if field in CLIENT_FIELDS or field in _JSON_FIELDS:
            try:
                out[field] = json.loads(value)
            except ValueError as exc:
                # json's message gives a position, never the text: safe with credentials in it
                raise StreamsConfigError(f"{name} must be JSON: {exc}") from exc
            if isinstance(out[field], Mapping):
                remember_settings(out[field])
        else:
            out[field] = value
    if unknown:
        raise StreamsConfigError(
            "; ".join(_unknown_variable(name, prefix, fields) for name in sorted(unknown))
        )
    return out


def _unknown_variable(name: str, prefix: str, fields: Collection[str]) -> str:
    match = closest(name[len(prefix) :].lower(), fields)
    hint = f"; did you mean {prefix}{match.upper()}?" if match else ""
    return f"environment variable {name} matches no setting{hint}"


def read_file(path: Path) -> Mapping[str, Any]:
    """Read a ``.yaml``/``.yml`` or Java ``.properties`` file into a flat-ish mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StreamsConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    except UnicodeDecodeError as exc:
        # Java reads .properties as ISO-8859-1; we do not guess: \uXXXX escapes work in UTF-8 too.
        raise StreamsConfigError(
            f"config file {str(path)!r} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}): save it as UTF-8 or write the character as a \\uXXXX escape"
        ) from None
    remember_text(text)  # before parsing: a file that does not parse holds credentials too
    if path.suffix.lower() not in (".yaml", ".yml"):
        return _parse_properties(text)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader (below)
    except yaml.YAMLError as exc:
        # from None: the YAML error's own text quotes the line, which may hold a credential
        raise StreamsConfigError(f"invalid YAML in config file {str(path)!r}{yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise StreamsConfigError(f"config file {str(path)!r} must contain a mapping at the top level")
    return data


_PLAIN_INT_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")


class _StrictLoader(yaml.SafeLoader):
    """YAML as Java's parsers would take it: a key given twice is an error (PyYAML keeps the
    last, so one of two conflicting settings was silently dropped), and so is a number with
    ``_`` separators (YAML 1.1 reads ``1_0`` as 10; Kafka's ``Integer.parseInt`` refuses it)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[str, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            line = key_node.start_mark.line + 1
            if key_node.value in first:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key_node.value!r} (first at line {first[key_node.value]})",
                    key_node.start_mark,
                )
            first[key_node.value] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if not _PLAIN_INT_RE.fullmatch(str(node.value)):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a number written with '_' separators, a leading 0, 0x/0b or ':' (YAML 1.1 reads "
                "1_0 as 10, 010 as 8, 1:30 as 90; Kafka refuses them): write plain digits, or "
                "quote the value if it is text",
                node.start_mark,
            )
        return int(super().construct_yaml_int(node))


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``, line 3, column 7: <problem>`` -- where and what, without the snippet of the line that
    PyYAML's own message adds (it may be a credential's line)."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f": {type(exc).__name__}"
    mark = exc.problem_mark or exc.context_mark
    where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
    return f"{where}: {what or 'not valid YAML'}"


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
