"""``platform-streams groups describe``: the application's group, as Kafka's tools show it.

::

    platform-streams groups describe [MODULE:FACTORY] [--config F] [--set k=v]
        [--application-id ID] [--bootstrap-server HOST:PORT] [--json]

A streams group (``group_protocol="streams"``) is shown with the columns of
``kafka-streams-groups.sh --describe`` (``StreamsGroupCommand``: ``--state --verbose``,
``--members --verbose``, ``--offsets``): state, group epoch, target-assignment epoch,
topology epoch, each member's epoch, process, client id and tasks (``ACTIVE: 0:[0,1]; ``),
and the committed offset, log end and lag of each input partition. A consumer group
(the classic protocol) gets the same sections with what librdkafka describes: its state,
its members (on brokers that list them) and its committed offsets. Only the application's
own group is read; nothing is changed.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from platform_streams.cli_app_loader import CliError, add_config_arguments, load_app, load_config
from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.kafka.streams_group_admin import describe_streams_group
from platform_streams.ops.topics import admin_for

__all__ = ["GroupDescriptionResult", "add_groups_arguments", "describe_application_group", "run_groups"]


@dataclass
class GroupDescriptionResult:
    """The application's group; epochs are None for a consumer group (librdkafka has none)."""

    group_id: str
    group_type: str
    state: str
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None
    topology_epoch: int | None = None
    members: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[dict[str, Any]] = field(default_factory=list)
    """``topic``, ``partition``, ``current_offset``, ``log_end_offset``, ``lag`` per partition."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        group = self.group_id
        epochs = (self.group_epoch, self.target_assignment_epoch, self.topology_epoch)
        header = ("GROUP", "TYPE", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH")
        row = (group, self.group_type, self.state, *epochs, len(self.members))
        lines = _table((*header, "#MEMBERS"), [row])
        if self.members:
            lines += _table(
                ("GROUP", "MEMBER", "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "HOST", "ASSIGNMENTS"),
                [
                    (
                        group,
                        m["member_id"],
                        m.get("member_epoch"),
                        m.get("process_id"),
                        m["client_id"],
                        m["host"],
                        _assignments(m.get("tasks") or {}, m.get("target_tasks") or {}),
                    )
                    for m in self.members
                ],
            )
        if not self.offsets:
            return "\n".join([*lines, f"Group {group!r} has no committed offsets."])
        keys = ("topic", "partition", "current_offset", "log_end_offset", "lag")
        lines += _table(
            ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"),
            [(group, *(o[k] for k in keys)) for o in self.offsets],
        )
        return "\n".join(lines).rstrip("\n")


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    """Columns as wide as their widest cell (at least 15, as Kafka's tools), ``-`` for none,
    and a blank line after."""
    cells = [list(header)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(15, *(len(r[i]) for r in cells)) for i in range(len(header))]
    return [" ".join(f"{c:<{w}}" for c, w in zip(r, widths, strict=True)).rstrip() for r in cells] + [""]


def _assignments(tasks: dict[str, dict[str, list[int]]], target: dict[str, dict[str, list[int]]]) -> str:
    """Kafka's ASSIGNMENTS column (``StreamsGroupCommand.getTasksForPrinting``), the target
    only where it differs from what the member owns."""
    out = ""
    for prefix, kinds in (("", tasks), ("TARGET-", target if target != tasks else {})):
        for kind in ("active", "standby", "warmup"):
            if kinds.get(kind):
                ids = "".join(f"{sub}:[{','.join(map(str, parts))}]; " for sub, parts in kinds[kind].items())
                out += f"{prefix}{kind.upper()}: {ids}"
    return out.strip() or "-"


def _described(client: KafkaAdmin, config: StreamsConfig, timeout_s: float) -> GroupDescriptionResult:
    app_id = config.application_id
    group = client.describe_group(app_id, timeout=timeout_s)
    streams = None
    if group.group_type == "streams":
        streams = describe_streams_group(config.admin_configs(), app_id)
    if streams is None:  # a consumer group (or the streams group went away meanwhile)
        members = [asdict(m) for m in group.members]
        return GroupDescriptionResult(app_id, group.group_type, group.state, members=members)
    return GroupDescriptionResult(
        app_id,
        "streams",
        streams.state,
        streams.group_epoch,
        streams.assignment_epoch,
        streams.topology_epoch,
        [asdict(m) for m in streams.members],
    )


def _offsets(client: KafkaAdmin, config: StreamsConfig, timeout_s: float) -> list[dict[str, Any]]:
    listed = client.committed_offsets(config.application_id, timeout=timeout_s)
    committed = {tp: o for tp, o in listed.items() if o is not None}
    if not committed:
        return []
    consumer = config.restore_consumer_configs()
    ends = log_end_offsets(consumer, sorted(committed), timeout_s=timeout_s, admin=client)
    out = []
    for (topic, partition), current in sorted(committed.items()):
        end = ends.get((topic, partition))
        lag = None if end is None else max(0, end - current)
        row = {"topic": topic, "partition": partition, "current_offset": current, "log_end_offset": end}
        out.append({**row, "lag": lag})
    return out


def describe_application_group(
    config: StreamsConfig, *, admin: KafkaAdmin | None = None, timeout_s: float = 30.0
) -> GroupDescriptionResult:
    """Describe the application's group (module docstring); never changes anything."""
    client, owned = admin_for(config, admin)
    try:
        result = _described(client, config, timeout_s)
        result.offsets = _offsets(client, config, timeout_s)
    finally:
        if owned:
            client.close()
    return result


def add_groups_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="groups_action", metavar="ACTION", required=True)
    text = (
        "show the application's group: state and epochs, members and their tasks, committed offsets "
        "and lag (kafka-streams-groups.sh --describe for a streams group)"
    )
    sub = actions.add_parser("describe", help=text, description=text)
    sub.add_argument(
        "app", nargs="?", metavar="MODULE:FACTORY", help="the application (as for run); or --application-id"
    )
    add_config_arguments(sub)
    sub.add_argument("--application-id", metavar="ID", help="the application.id (the group's id)")
    sub.add_argument("--bootstrap-server", "--bootstrap-servers", metavar="HOST:PORT", dest="bootstrap")
    sub.add_argument("--json", action="store_true", help="print the description as JSON")


def run_groups(args: argparse.Namespace) -> int:
    flags = [f"application_id={args.application_id}"] if args.application_id else []
    flags += [f"bootstrap_servers={args.bootstrap}"] if args.bootstrap else []
    if args.app is not None:
        app = load_app(args.app)
        config = load_config(args.config, [*args.overrides, *flags], app.settings)
    elif args.application_id:
        config = load_config(args.config, [*args.overrides, *flags])
    else:
        raise CliError("groups describe needs MODULE:FACTORY or --application-id")
    result = describe_application_group(config)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.summary(), flush=True)
    return 0
