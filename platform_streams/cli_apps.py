"""``platform-streams apps list|describe|validate``: the installed application plugins.

::

    platform-streams apps list [--json]
    platform-streams apps describe NAME [CONFIG] [--json]
    platform-streams apps validate NAME CONFIG [--json]

``CONFIG`` is a YAML or JSON file holding the app's own configuration (the fields of its
config model, see :mod:`platform_streams.apps`). ``validate`` prints one line per wrong
field and exits 1, so a deployment pipeline can check a configuration before it ships.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from platform_streams.apps import (
    AppConfigError,
    AppPlugin,
    app_fingerprint,
    discover_apps,
    get_app,
    load_config_file,
)
from platform_streams.cli_app_loader import CliError
from platform_streams.errors import StreamsConfigError
from platform_streams.topology.compiler import compile_topology

__all__ = ["add_apps_arguments", "run_apps"]

_ACTIONS = {
    "list": "list the installed application plugins (entry points of the group platform_streams.apps)",
    "describe": "show an app's config fields and, for a valid config, its topology",
    "validate": "check a config file against an app's config model (exit 1 with field errors)",
}


def add_apps_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="apps_action", metavar="ACTION", required=True)
    for name, text in _ACTIONS.items():
        sub = actions.add_parser(name, help=text, description=text)
        if name != "list":
            sub.add_argument("name", metavar="NAME", help="the app plugin's name (see 'apps list')")
            sub.add_argument(
                "config",
                metavar="CONFIG",
                nargs="?" if name == "describe" else None,
                help="YAML/JSON file with the app's configuration"
                + (" (default: the model's defaults)" if name == "describe" else ""),
            )
        sub.add_argument("--json", action="store_true", help="print JSON")


def _plugin(name: str) -> AppPlugin:
    try:
        return get_app(name)
    except StreamsConfigError as exc:
        raise CliError(str(exc), exit_code=1) from exc


def _config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return load_config_file(path)
    except StreamsConfigError as exc:
        raise CliError(str(exc), exit_code=1) from exc


def _list(as_json: bool) -> int:
    installed = discover_apps()
    if as_json:
        apps = [
            {
                "name": p.name,
                "source": p.source,
                "description": p.description,
                "config": p.config_model.__name__,
            }
            for p in installed.apps.values()
        ]
        print(json.dumps({"apps": apps, "broken": installed.broken}, indent=2))
    else:
        if not installed.apps and not installed.broken:
            print("no app plugins installed (entry point group 'platform_streams.apps')")
        for plugin in installed.apps.values():
            print(f"{plugin.name:<20} {plugin.description or '-'}  [{plugin.source}]")
        for name, error in installed.broken.items():
            print(f"{name:<20} BROKEN: {error}")
    return 1 if installed.broken else 0


def _fields(plugin: AppPlugin) -> list[dict[str, Any]]:
    out = []
    for name, info in plugin.config_model.model_fields.items():
        required = info.is_required()
        out.append(
            {
                "name": name,
                "type": getattr(info.annotation, "__name__", str(info.annotation)),
                "required": required,
                "default": None if required else info.get_default(call_default_factory=True),
                "description": info.description or "",
            }
        )
    return out


def _describe(plugin: AppPlugin, raw: dict[str, Any], as_json: bool) -> int:
    fields = _fields(plugin)
    data: dict[str, Any] = {
        "name": plugin.name,
        "source": plugin.source,
        "description": plugin.description,
        "config_model": plugin.config_model.__name__,
        "fields": fields,
        "default_settings": dict(plugin.default_settings),
    }
    try:
        config = plugin.validate_config(raw)
    except AppConfigError as exc:
        data["config_errors"] = [e.describe() for e in exc.errors]
        config = None
    if config is not None:
        topology = plugin.build(config)
        plan = compile_topology(topology)
        data.update(
            {
                "config": config.model_dump(mode="json"),
                "fingerprint": app_fingerprint(topology, plugin.name, config.model_dump(mode="json")),
                "source_topics": plan.external_source_topics(),
                "sink_topics": plan.external_sink_topics(),
                "internal_topics": sorted(plan.internal_topics),
                "stores": sorted({s for sub in plan.subtopologies for s in sub.stores}),
                "topology": str(topology.describe()),
            }
        )
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    print(f"app {plugin.name}: {plugin.description or '-'}  [{plugin.source}]")
    print(f"config model {data['config_model']}:")
    for f in fields:
        default = "required" if f["required"] else f"default {f['default']!r}"
        print(f"  {f['name']}: {f['type']} ({default}) {f['description']}".rstrip())
    if data["default_settings"]:
        settings = ", ".join(f"{k}={v}" for k, v in data["default_settings"].items())
        print(f"default StreamsConfig settings: {settings}")
    if config is None:
        print("the config is not valid, so no topology:", *data["config_errors"], sep="\n  ")
        return 0
    for key in ("source_topics", "sink_topics", "internal_topics", "stores"):
        print(f"{key.replace('_', ' ')}: {', '.join(data[key]) or '(none)'}")
    print(f"fingerprint: {data['fingerprint']}")
    print(data["topology"], end="")
    return 0


def _validate(plugin: AppPlugin, raw: dict[str, Any], path: str, as_json: bool) -> int:
    try:
        config = plugin.validate_config(raw)
    except AppConfigError as exc:
        if as_json:
            errors = [{"field": e.field, "message": e.message, "value": e.value} for e in exc.errors]
            print(json.dumps({"app": plugin.name, "valid": False, "errors": errors}, indent=2, default=str))
        else:
            print(f"{path}: INVALID config for app {plugin.name!r}:")
            for error in exc.errors:
                print(f"  {error.describe()}")
        return 1
    if as_json:
        print(
            json.dumps(
                {"app": plugin.name, "valid": True, "config": config.model_dump(mode="json")}, indent=2
            )
        )
    else:
        print(f"{path}: OK, a valid config for app {plugin.name!r}")
    return 0


def run_apps(args: argparse.Namespace) -> int:
    action = args.apps_action
    if action == "list":
        return _list(args.json)
    plugin = _plugin(args.name)
    raw = _config(args.config)
    if action == "describe":
        return _describe(plugin, raw, args.json)
    return _validate(plugin, raw, args.config, args.json)
