"""``platform-streams topics ...`` and ``platform-streams reset``: the ops as commands.

::

    platform-streams topics plan|validate MODULE:FACTORY [--config F] [--set k=v] [--json]
    platform-streams topics create MODULE:FACTORY [--dry-run] ...
    platform-streams topics create-io MODULE:FACTORY [--partitions N] [--topic-config k=v ...]
        [--topic T ...] [--dry-run]
    platform-streams topics delete MODULE:FACTORY [--topic T ...] [--include-orphans] [--dry-run] [--yes]
    platform-streams reset MODULE:FACTORY [--input-topics a,b] [--to-earliest | --to-latest |
        --to-offset N | --shift-by N | --to-datetime ISO | --by-duration PnDTnHnMnS |
        --from-file plan.csv] [--dry-run] [--force] [--include-orphans] [--keep-local-state] [--yes]

Destructive commands (``topics delete``, ``reset``) ask for confirmation on the terminal
unless ``--yes``; without a terminal (a Job, a pipe) they refuse unless ``--yes``.
Exit status: 0 done, 1 refused / validation failed / a dry run that a real run would
refuse, 2 usage errors. Results print as a summary, or as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import yaml

from platform_streams.cli_app_loader import (
    CliError,
    add_app_argument,
    add_config_arguments,
    load_app,
    load_config,
)
from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsConfigError
from platform_streams.ops.autoscaling import keda_values
from platform_streams.ops.io_topics import create_io_topics
from platform_streams.ops.offsets import OffsetScenario
from platform_streams.ops.reset import ResetOptions, application_without_code, reset_application
from platform_streams.ops.results import OperationRefusedError, OpsResult
from platform_streams.ops.topics import (
    AppLike,
    Confirm,
    create_internal_topics,
    delete_internal_topics,
    plan_internal_topics,
    validate_internal_topics,
)
from platform_streams.topology.topology import Topology

if TYPE_CHECKING:  # the registry client is an extra (schema-registry), loaded only when used
    from platform_streams.kafka.schema_registry import RegistrySettings

__all__ = ["add_reset_arguments", "add_topics_arguments", "run_reset", "run_topics"]

#: The Schema Registry login (``user:password``) of ``reset --schema-registry-url``.
REGISTRY_LOGIN_ENV = "PLATFORM_STREAMS_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO"

_TOPICS_ACTIONS = {
    "plan": "show every internal topic the application needs (partitions, configs) and whether it exists, "
    "and its coordination topics (<application.id>-control, -metadata; the runtime creates them)",
    "create": "create the missing internal topics (idempotent)",
    "validate": "report missing internal topics, wrong partition counts and configs (exit 1 if any)",
    "delete": "delete the application's internal and coordination topics (only topics it owns)",
    "create-io": "development helper: create the application's missing input and output topics "
    "(existing topics are reported, never changed)",
    "keda": "print the Helm chart's autoscaling.keda values: the input and repartition topics the "
    "group reads, and the partition count that bounds maxReplicas (helm upgrade -f)",
}


def _common(parser: argparse.ArgumentParser) -> None:
    add_app_argument(parser)
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def add_topics_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="topics_action", metavar="ACTION", required=True)
    for name, text in _TOPICS_ACTIONS.items():
        sub = actions.add_parser(name, help=text, description=text)
        _common(sub)
        if name in ("create", "delete", "create-io"):
            sub.add_argument("--dry-run", action="store_true", help="show what would be done, change nothing")
        if name == "create-io":
            _add_create_io_arguments(sub)
        if name == "delete":
            sub.add_argument(
                "--topic",
                dest="topics",
                action="append",
                metavar="TOPIC",
                help="delete only this topic (repeatable); refused unless it belongs to the application",
            )
            _add_orphans_and_yes(sub, "delete")


def _add_create_io_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        metavar="N",
        help="partitions of each created topic (default 1; a topic co-partitioned with an existing "
        "one gets that one's count)",
    )
    parser.add_argument(
        "--topic-config",
        dest="topic_configs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config of the created topics (repeatable), e.g. --topic-config retention.ms=86400000",
    )
    parser.add_argument(
        "--topic",
        dest="topics",
        action="append",
        metavar="TOPIC",
        help="create only this topic (repeatable); refused unless the application reads or writes it",
    )


def _add_orphans_and_yes(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--include-orphans",
        action="store_true",
        help="also delete topics named like internal topics (<application.id>-*-changelog, "
        "-repartition, ...) that the topology no longer declares; never those of another application "
        "whose id starts with '<application.id>-' (one with a consumer group or coordination topics)",
    )
    parser.add_argument("--yes", "-y", action="store_true", help=f"{what} without asking")


def add_reset_arguments(parser: argparse.ArgumentParser) -> None:
    # MODULE:FACTORY is optional here: with Kafka's StreamsResetter flags the reset works
    # without the application's code (e.g. from an operations box with only this package).
    parser.add_argument(
        "app",
        nargs="?",
        metavar="MODULE:FACTORY",
        help="the application (as for run); omit it and pass --application-id and --input-topics "
        "to reset without the application's code, like Kafka's kafka-streams-application-reset",
    )
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--application-id", metavar="ID", help="the application.id (and consumer group)")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", metavar="HOST:PORT", dest="bootstrap")
    parser.add_argument(
        "--input-topics",
        metavar="A,B",
        help="comma-separated topics whose offsets are reset (default: every source topic of the topology)",
    )
    parser.add_argument(
        "--intermediate-topics",
        metavar="A,B",
        help="comma-separated topics the application writes and reads back: skipped to their end",
    )
    parser.add_argument(
        "--internal-topics",
        metavar="A,B",
        help="delete only these internal topics (each named like one, <application.id>-*-changelog, "
        "-repartition, ..., and not another application's); default: every internal topic of the application",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true", help="to the log start (the default)")
    where.add_argument("--to-latest", action="store_true", help="to the log end (skip everything)")
    where.add_argument("--to-offset", type=int, metavar="N", help="to offset N (clamped to each log)")
    where.add_argument(
        "--shift-by", type=int, metavar="N", help="by N from the committed offset (may be < 0)"
    )
    where.add_argument(
        "--to-datetime", metavar="ISO", help="to the first record at or after 2024-05-01T12:00:00.000[Z]"
    )
    where.add_argument(
        "--by-duration", metavar="PnDTnHnMnS", help="to the first record at or after now minus this"
    )
    where.add_argument("--from-file", metavar="CSV", help="to the offsets in a topic,partition,offset file")
    parser.add_argument("--dry-run", action="store_true", help="print every action, change nothing")
    parser.add_argument(
        "--force",
        action="store_true",
        help="the instances are stopped but the group still has left-over members (e.g. killed pods): "
        "a temporary member joins and leaves so the broker expires them (librdkafka cannot remove "
        "members), instead of refusing",
    )
    parser.add_argument(
        "--force-timeout",
        type=float,
        metavar="SECONDS",
        help="how long --force waits for the group to empty (default: twice the session timeout + 5)",
    )
    parser.add_argument(
        "--keep-local-state",
        action="store_true",
        help="do not wipe <state_dir>/<application.id> (nor <state_dir>-w<i>/<application.id> of "
        "--workers processes) on this machine",
    )
    parser.add_argument(
        "--max-scan-records",
        type=int,
        default=1_000_000,
        metavar="N",
        help="per partition, when a time must be found by reading records (default 1000000)",
    )
    parser.add_argument(
        "--schema-registry-url",
        metavar="URL",
        help="the Schema Registry of the application's registry serdes: the subjects of the internal "
        f"topics the reset deletes are soft-deleted too (login: the {REGISTRY_LOGIN_ENV} "
        "environment variable, user:password)",
    )
    parser.add_argument(
        "--hard-delete-subjects",
        action="store_true",
        help="with --schema-registry-url: hard-delete those subjects after the soft delete (permanent)",
    )
    _add_orphans_and_yes(parser, "reset")


def _load(args: argparse.Namespace) -> tuple[Topology, StreamsConfig]:
    app = load_app(args.app)
    return app.topology, load_config(args.config, args.overrides, app.settings)


def _terminal_confirm(question: str) -> Confirm:
    """Ask on the terminal; without one, refuse (the caller must pass --yes)."""

    def confirm(items: Sequence[str]) -> bool:
        if not sys.stdin or not sys.stdin.isatty():
            raise CliError(f"{question}: no terminal to confirm on; pass --yes to proceed", exit_code=1)
        print(f"{question}:", *(f"  {item}" for item in items), sep="\n", file=sys.stderr)
        answer = input("Type 'yes' to proceed: ")
        return answer.strip().lower() == "yes"

    return confirm


def _emit(result: OpsResult, as_json: bool) -> None:
    print(json.dumps(result.to_dict(), indent=2) if as_json else result.summary(), flush=True)


def _run(action: Callable[[], OpsResult], as_json: bool) -> int:
    try:
        result = action()
    except OperationRefusedError as exc:
        _emit(exc.result, as_json)
        raise
    _emit(result, as_json)
    return 0 if result.ok else 1


def run_topics(args: argparse.Namespace) -> int:
    topology, config = _load(args)
    name = args.topics_action
    if name == "plan":
        return _run(lambda: plan_internal_topics(topology, config), args.json)
    if name == "validate":
        return _run(lambda: validate_internal_topics(topology, config), args.json)
    if name == "create":
        return _run(lambda: create_internal_topics(topology, config, dry_run=args.dry_run), args.json)
    if name == "create-io":
        if args.partitions < 1:
            raise CliError(f"--partitions must be >= 1, got {args.partitions}")
        topic_config = _key_values(args.topic_configs, "--topic-config")
        return _run(
            lambda: create_io_topics(
                topology,
                config,
                partitions=args.partitions,
                topic_config=topic_config,
                topics=args.topics,
                dry_run=args.dry_run,
            ),
            args.json,
        )
    if name == "keda":
        try:
            values = keda_values(topology, config)
        except StreamsConfigError as exc:
            raise CliError(str(exc), exit_code=1) from exc
        print(json.dumps(values, indent=2) if args.json else yaml.safe_dump(values, sort_keys=False), end="")
        return 0
    confirm = None if args.yes else _terminal_confirm("delete these topics")
    return _run(
        lambda: delete_internal_topics(
            topology,
            config,
            topics=args.topics,
            include_orphans=args.include_orphans,
            dry_run=args.dry_run,
            confirm=confirm,
        ),
        args.json,
    )


def _key_values(items: Sequence[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} needs KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _scenario(args: argparse.Namespace) -> OffsetScenario:
    try:
        if args.to_latest:
            return OffsetScenario.to_latest()
        if args.to_offset is not None:
            return OffsetScenario.to_offset(args.to_offset)
        if args.shift_by is not None:
            return OffsetScenario.shift_by(args.shift_by)
        if args.to_datetime is not None:
            return OffsetScenario.to_datetime(args.to_datetime)
        if args.by_duration is not None:
            return OffsetScenario.by_duration(args.by_duration)
        if args.from_file is not None:
            return OffsetScenario.from_file(args.from_file)
    except StreamsConfigError as exc:
        raise CliError(str(exc)) from exc
    return OffsetScenario.to_earliest()


def _topic_list(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def _reset_target(args: argparse.Namespace) -> tuple[AppLike, StreamsConfig]:
    """The application and its settings; Kafka's flags override (or replace) the code's."""
    flags = [f"application_id={args.application_id}"] if args.application_id else []
    flags += [f"bootstrap_servers={args.bootstrap}"] if args.bootstrap else []
    if args.app is not None:
        app = load_app(args.app)
        return app.topology, load_config(args.config, [*args.overrides, *flags], app.settings)
    if not args.application_id or args.input_topics is None:
        raise CliError("reset without MODULE:FACTORY needs --application-id and --input-topics")
    return application_without_code(), load_config(args.config, [*args.overrides, *flags])


def _registry_settings(args: argparse.Namespace) -> RegistrySettings | None:
    """``--schema-registry-url`` with the login from the environment (a command line is seen
    by every user of the machine and kept in shell histories)."""
    if args.schema_registry_url is None:
        if args.hard_delete_subjects:
            raise CliError("--hard-delete-subjects needs --schema-registry-url")
        return None
    from platform_streams.kafka.schema_registry import RegistrySettings

    login = os.environ.get(REGISTRY_LOGIN_ENV) or None
    return RegistrySettings(args.schema_registry_url, login)


def run_reset(args: argparse.Namespace) -> int:
    scenario = _scenario(args)
    registry = _registry_settings(args)
    topology, config = _reset_target(args)
    options = ResetOptions(
        scenario=scenario,
        input_topics=_topic_list(args.input_topics),
        intermediate_topics=_topic_list(args.intermediate_topics) or (),
        internal_topics=_topic_list(args.internal_topics),
        dry_run=args.dry_run,
        force=args.force,
        force_timeout_s=args.force_timeout,
        # without the code every internal-looking topic is an orphan: Kafka deletes them all
        include_orphans=args.include_orphans or args.app is None,
        wipe_local_state=not args.keep_local_state,
        max_scan_records=args.max_scan_records,
        schema_registry=registry,
        hard_delete_subjects=args.hard_delete_subjects,
    )
    confirm = None if args.yes else _terminal_confirm(f"reset application {config.application_id!r}")
    return _run(lambda: reset_application(topology, config, options, confirm=confirm), args.json)
