"""How the CLI finds an application and its settings: ``module:factory`` and the config layers.

Shared by every subcommand that works on an application (``run``, ``describe``, and later
``reset``/``topics``), so they all accept the same ``APP`` and ``--config``/``--set``
arguments and fail the same way: with a :class:`CliError` whose message is one line that
names what is wrong (the module, the attribute, the config field), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from platform_streams.config import StreamsConfig, is_secret_key
from platform_streams.config.layers import Layers, named_layers
from platform_streams.errors import StreamsConfigError
from platform_streams.topology.topology import Topology, built_topology

__all__ = ["CliError", "LoadedApp", "add_app_argument", "add_config_arguments", "load_app", "load_config"]

CONFIG_SUFFIXES = (".yaml", ".yml", ".properties")
# Client dicts may hold credentials: their rejected values are never echoed.
_SECRET_FIELDS = ("client_config", "consumer_config", "producer_config", "admin_config")


#: exit status of a command whose input (arguments, settings, state directory) is wrong
USAGE_OR_CONFIG = 2
#: exit status when the application's code fails (on import, in the factory, while running)
APP_CODE_FAILED = 1
#: exit status when no bootstrap address of the cluster accepts a connection
BROKER_UNREACHABLE = 3


class CliError(Exception):
    """A failure the CLI reports as one line on stderr, exiting with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = USAGE_OR_CONFIG) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class LoadedApp:
    """What an application factory produced: the topology, and settings it asked for."""

    spec: str
    topology: Topology
    settings: Mapping[str, Any] = field(default_factory=dict)


def add_app_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "app",
        metavar="MODULE:FACTORY",
        help="a callable returning a Topology, a StreamsBuilder or a (topology, settings-dict) pair, "
        "e.g. examples.orders_app:topology (the current directory is importable)",
    )


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        type=Path,
        help="settings file (.yaml/.yml/.properties, Kafka Streams keys); "
        "PLATFORM_STREAMS_<FIELD> environment variables and --set override it",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one setting (repeatable), e.g. --set bootstrap.servers=host:9092",
    )


def load_app(spec: str) -> LoadedApp:
    """Import ``module:attr`` and turn what it is or returns into a :class:`LoadedApp`.

    ``attr`` may be dotted (``module:Class.factory``); a callable is called with no
    arguments, a Topology or StreamsBuilder object is used as it is.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"APP must look like 'package.module:factory', got {spec!r}")
    # Like ``python -m`` (and gunicorn/uvicorn): apps in the working directory are importable
    # even when the command is the installed ``platform-streams`` script.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    target: Any = _import_app_module(module_name)
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"{module_name!r} has no attribute {attr!r}") from None
    try:
        made = target() if callable(target) else target
    except StreamsConfigError as exc:  # the factory found a setting wrong (e.g. PLATFORM_STREAMS_APP)
        raise CliError(f"{spec}: {exc}") from exc
    except Exception as exc:
        raise CliError(f"{spec} raised {_one_line(exc)}{_where(exc)}", APP_CODE_FAILED) from exc
    settings: Mapping[str, Any] = {}
    if isinstance(made, tuple) and len(made) == 2:
        made, settings = made
        if not isinstance(settings, Mapping):
            raise CliError(
                f"{spec} returned a pair whose second item is {type(settings).__name__}, not a dict"
            )
    topology = built_topology(made)
    if topology is None:
        raise CliError(
            f"{spec} gave {type(made).__name__}; expected a Topology, a StreamsBuilder "
            "or a (topology, settings) pair"
        )
    return LoadedApp(spec, topology, dict(settings))


def _import_app_module(module_name: str) -> Any:
    """Import the app's module; exit 2 if it does not exist, 1 if its own code fails.

    A missing module is a wrong ``APP`` argument (usage); a module that exists but does
    not compile or raises on import is the application's code failing, as a raising
    factory is (see the exit status table in the README).
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            raise CliError(f"cannot import {module_name!r}: {exc}") from exc
        raise CliError(f"cannot import {module_name!r}: {exc}{_where(exc)}", APP_CODE_FAILED) from exc
    except SyntaxError as exc:
        raise CliError(
            f"cannot import {module_name!r}: {exc.msg} ({exc.filename}, line {exc.lineno})", APP_CODE_FAILED
        ) from exc
    except Exception as exc:
        raise CliError(
            f"cannot import {module_name!r}: it raised {_one_line(exc)}{_where(exc)}", APP_CODE_FAILED
        ) from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _where(exc: BaseException) -> str:
    """`` (file.py, line N)``: the innermost frame of the traceback (the app's code)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    return f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """``["a.b=1", "c=x=y"]`` -> ``{"a.b": "1", "c": "x=y"}``; values are validated later."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set needs KEY=VALUE, got {item!r}")
        if is_secret_key(key.strip()):
            # argv is readable by every user of the host (ps) and `run --workers` copies it
            field = key.strip().replace(".", "_").lower()
            where = f"PLATFORM_STREAMS_{field.upper()}" if field in StreamsConfig.model_fields else None
            raise CliError(
                f"--set {key.strip()}=... would put a secret on the command line (visible in ps): "
                f"pass it in the environment ({where or 'PLATFORM_STREAMS_<CLIENT>_CONFIG as JSON'}) "
                "or in the --config file"
            )
        out[key.strip()] = value
    return out


def load_config(
    path: Path | None,
    overrides: Sequence[str],
    app_settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] = os.environ,
) -> StreamsConfig:
    """The app's settings, then the file, then ``PLATFORM_STREAMS_*``, then ``--set``."""
    if path is not None and path.suffix.lower() not in CONFIG_SUFFIXES:
        raise CliError(f"--config must be a {'/'.join(CONFIG_SUFFIXES)} file, got {str(path)!r}")
    layers: Layers = []
    try:
        layers = named_layers(path, env, parse_overrides(overrides), app_settings, StreamsConfig.model_fields)
        return StreamsConfig.from_layers(layers)
    except ValidationError as exc:
        raise CliError(f"invalid config: {format_validation_error(exc, layers)}") from exc
    except StreamsConfigError as exc:
        raise CliError(f"invalid config: {exc}") from exc


def format_validation_error(
    exc: ValidationError, layers: Sequence[tuple[str, Mapping[str, Any]]] = ()
) -> str:
    """Pydantic's errors as one line: ``field: problem (got value, from layer); other: problem``."""
    parts = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"]) or "settings"
        msg = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "missing":
            msg = "required, but not set (in the file, PLATFORM_STREAMS_* or --set)"
        elif error["loc"] and "got" not in msg and not any(_hidden(str(p)) for p in error["loc"]):
            # no loc: a cross-field check, whose input is every setting (credentials included)
            shown = repr(error.get("input"))
            msg += f" (got {shown[:60] + '...' if len(shown) > 60 else shown})"
        origin = _layer_of(str(error["loc"][0]), layers) if error["loc"] else None
        parts.append(f"{loc}: {msg}" + (f" [from {origin}]" if origin else ""))
    return "; ".join(parts)


def _hidden(name: str) -> bool:
    """Whether a rejected value at ``name`` (a field or a client property) may be a credential."""
    return name in _SECRET_FIELDS or is_secret_key(name)


def _layer_of(field: str, layers: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
    """The name of the last (winning) layer that set ``field``."""
    return next((name for name, values in reversed(layers) if field in values), None)
