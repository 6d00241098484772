"""Stream applications as installable plugins, found the way Kafka Connect finds connectors.

Why plugins: the platform (the CLI, the Dagster code location, a Helm release) operates
applications it did not write. An application package declares itself with one entry
point in the group ``platform_streams.apps``; its value names an :class:`AppPlugin`::

    [project.entry-points."platform_streams.apps"]
    orders = "examples.orders_app:PLUGIN"

An :class:`AppPlugin` pairs a topology factory with the pydantic model of the factory's
own configuration (topic names, thresholds). The platform can then list what is
installed, validate a configuration field by field *before* anything runs
(:meth:`AppPlugin.validate_config`), build the topology, and compute the
:func:`app_fingerprint` that says whether running workers are out of date.

Worker processes run a plugin through the ordinary ``platform-streams run`` command with
the factory :func:`plugin_topology`, which reads the plugin name from
``PLATFORM_STREAMS_APP`` and its configuration from ``PLATFORM_STREAMS_APP_CONFIG``
(JSON text, or ``@path`` to a JSON/YAML file): environment variables are how a process
launcher and a Kubernetes pod spec alike hand configuration to a process.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from platform_streams.config.secret_keys import is_secret_key, remember_text
from platform_streams.config.sources import yaml_problem
from platform_streams.errors import StreamsConfigError
from platform_streams.topology.topology import Topology, built_topology

__all__ = [
    "APP_CONFIG_ENV",
    "APP_ENV",
    "ENTRY_POINT_GROUP",
    "AppConfigError",
    "AppPlugin",
    "FieldError",
    "InstalledApps",
    "UnknownAppError",
    "app_fingerprint",
    "discover_apps",
    "field_errors",
    "get_app",
    "load_config_file",
    "plugin_topology",
]

ENTRY_POINT_GROUP = "platform_streams.apps"
APP_ENV = "PLATFORM_STREAMS_APP"
APP_CONFIG_ENV = "PLATFORM_STREAMS_APP_CONFIG"

TopologyFactory = Callable[[Any], Any]
"""``factory(config_model_instance)`` -> a Topology or a StreamsBuilder."""


@dataclass(frozen=True)
class FieldError:
    """One invalid field of an application configuration."""

    field: str
    message: str
    value: Any = None

    def describe(self) -> str:
        shown = "" if self.value is None else f" (got {_short_repr(self.value)})"
        return f"{self.field}: {self.message}{shown}"


class AppConfigError(StreamsConfigError):
    """An application configuration does not match the plugin's model; ``errors`` per field."""

    def __init__(self, app: str, errors: list[FieldError]) -> None:
        self.app = app
        self.errors = errors
        super().__init__(f"invalid config for app {app!r}: " + "; ".join(e.describe() for e in errors))


class UnknownAppError(StreamsConfigError):
    """No installed plugin has this name."""


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def field_errors(exc: ValidationError) -> list[FieldError]:
    """Pydantic's errors as :class:`FieldError` (``missing`` values and secrets are not echoed)."""
    out = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"]) or "(root)"
        message = str(error["msg"]).removeprefix("Value error, ")
        value = None if error["type"] == "missing" else error.get("input")
        if isinstance(value, Mapping) or is_secret_key(loc):  # the whole object, or a credential
            value = None
        out.append(FieldError(loc, message, value))
    return out


@dataclass(frozen=True)
class AppPlugin:
    """A stream application the platform can operate: a factory and its config model.

    ``default_settings`` are StreamsConfig settings the application asks for (e.g. its
    ``application_id``); the operator's settings override them.
    """

    factory: TopologyFactory
    config_model: type[BaseModel]
    description: str = ""
    default_settings: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    """Filled in from the entry point name by :func:`discover_apps`."""
    source: str = ""
    """Where the plugin came from (the entry point value)."""

    def validate_config(self, raw: Mapping[str, Any] | BaseModel | None = None) -> BaseModel:
        """The configuration as the model; :class:`AppConfigError` lists every bad field."""
        if isinstance(raw, self.config_model):
            return raw
        data = raw.model_dump() if isinstance(raw, BaseModel) else dict(raw or {})
        try:
            return self.config_model.model_validate(data)
        except ValidationError as exc:
            raise AppConfigError(self.name or self.source or "app", field_errors(exc)) from exc

    def build(self, config: Mapping[str, Any] | BaseModel | None = None) -> Topology:
        """Validate ``config`` and build the topology."""
        made = self.factory(self.validate_config(config))
        topology = built_topology(made)
        if topology is None:
            raise StreamsConfigError(
                f"app {self.name!r}: the factory returned {type(made).__name__}, "
                "not a Topology or StreamsBuilder"
            )
        return topology

    def with_identity(self, name: str, source: str) -> AppPlugin:
        return AppPlugin(
            self.factory, self.config_model, self.description, self.default_settings, name, source
        )


@dataclass
class InstalledApps:
    """What discovery found: loadable plugins by name, and entry points that failed to load."""

    apps: dict[str, AppPlugin] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def _load_entry_point(ep: EntryPoint) -> AppPlugin:
    target = ep.load()
    if callable(target) and not isinstance(target, AppPlugin):
        target = target()
    if not isinstance(target, AppPlugin):
        raise TypeError(f"{ep.value} is a {type(target).__name__}, not an AppPlugin")
    return target.with_identity(ep.name, ep.value)


def discover_apps(group: str = ENTRY_POINT_GROUP) -> InstalledApps:
    """Load every plugin of ``group``; a broken one is reported, never fatal to the rest."""
    found = InstalledApps()
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        if ep.name in found.apps:
            # Two distributions claim one name: which one a process gets would be arbitrary.
            first = found.apps.pop(ep.name)
            found.broken[ep.name] = f"two plugins have this name: {first.source} and {ep.value}"
            continue
        if ep.name in found.broken:
            continue
        try:
            found.apps[ep.name] = _load_entry_point(ep)
        except Exception as exc:  # a plugin's import error must not hide the others
            found.broken[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"
    return found


def get_app(name: str, group: str = ENTRY_POINT_GROUP) -> AppPlugin:
    """The installed plugin ``name``; :class:`UnknownAppError` names the installed ones."""
    installed = discover_apps(group)
    if name in installed.apps:
        return installed.apps[name]
    if name in installed.broken:
        raise UnknownAppError(f"app {name!r} is installed but cannot be loaded: {installed.broken[name]}")
    known = ", ".join(sorted(installed.apps)) or "none"
    raise UnknownAppError(
        f"no app named {name!r} (installed: {known}); plugins are entry points in the group {group!r}"
    )


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A JSON or YAML file holding one mapping (an application's configuration)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise StreamsConfigError(f"cannot read {str(file)!r}: {exc}") from exc
    remember_text(text)  # its streams settings may hold credentials (config/secret_keys.py)
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except ValueError as exc:  # json's message gives a position, never the text
        raise StreamsConfigError(f"{str(file)!r} is not valid {file.suffix.lstrip('.')}: {exc}") from exc
    except yaml.YAMLError as exc:  # without the line PyYAML quotes: it may be a credential's
        raise StreamsConfigError(f"{str(file)!r} is not valid YAML{yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise StreamsConfigError(f"{str(file)!r} must hold a mapping at the top level")
    return dict(data)


def app_fingerprint(topology: Topology, *parts: Any) -> str:
    """A short stable hash of the topology description and any JSON-able ``parts``.

    Workers deployed at one fingerprint run exactly this topology with exactly this
    configuration; a different fingerprint means they must be restarted.
    """
    payload = json.dumps([str(topology.describe()), *parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def plugin_topology() -> tuple[Topology, dict[str, Any]]:
    """CLI factory: ``platform-streams run platform_streams.apps:plugin_topology``.

    Builds the plugin named by ``PLATFORM_STREAMS_APP`` with the configuration in
    ``PLATFORM_STREAMS_APP_CONFIG``; returns the topology and the plugin's default settings.
    """
    name = os.environ.get(APP_ENV, "").strip()
    if not name:
        raise StreamsConfigError(f"{APP_ENV} must name the app plugin to run")
    raw = os.environ.get(APP_CONFIG_ENV, "").strip()
    if raw.startswith("@"):
        config: dict[str, Any] = load_config_file(raw[1:])
    elif raw:
        try:
            config = json.loads(raw)
        except ValueError as exc:
            raise StreamsConfigError(f"{APP_CONFIG_ENV} is not JSON (or @file): {exc}") from exc
    else:
        config = {}
    plugin = get_app(name)
    return plugin.build(config), dict(plugin.default_settings)
