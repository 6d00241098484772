"""``<app>_dlq_replay``: ``platform-streams dlq replay`` as a Dagster job (apps with a
dead-letter topic only). A dry run by default, like the reset job: run it once to see what
would be sent (counts by error class and target topic, the first records), then again with
``dry_run: false``. Exactly once per dead letter across runs (platform_streams/ops/dead_letter_replay.py).
"""

from typing import Any

import dagster as dg
from pydantic import Field

from dagster_defs.resources import KafkaResource
from dagster_defs.spec import ResolvedStreamApp
from platform_streams.errors import StreamsConfigError
from platform_streams.ops import OperationRefusedError
from platform_streams.ops.dead_letter_replay import ReplayFilter, ReplayOptions, replay_dead_letters

__all__ = ["DeadLetterReplayConfig", "dlq_replay_job"]


class DeadLetterReplayConfig(dg.Config):
    """``platform-streams dlq replay``."""

    error_classes: list[str] = Field(
        default_factory=list, description="Only these __streams.errors.exception classes (default: all)."
    )
    since: str | None = Field(default=None, description="Only records at or after e.g. 2024-05-01T12:00:00Z.")
    until: str | None = Field(default=None, description="Only records before this time.")
    replay_topic: str | None = Field(
        default=None, description="Send every record here instead of its source topic."
    )
    dry_run: bool = Field(default=True, description="Report what would be sent, send nothing (the default).")
    show: int = Field(default=20, ge=0, description="How many records the result lists.")


def dlq_replay_job(app: ResolvedStreamApp) -> dg.JobDefinition | None:
    if app.dead_letter_topic is None:
        return None

    @dg.op(name=f"{app.name}_dlq_replay_op")
    def replay(
        context: dg.OpExecutionContext, config: DeadLetterReplayConfig, kafka: KafkaResource
    ) -> dict[str, Any]:
        streams = app.validated_settings(kafka.client_settings())
        try:
            options = ReplayOptions(
                filter=ReplayFilter.parse(config.error_classes, config.since, config.until),
                replay_topic=config.replay_topic,
                dry_run=config.dry_run,
                show=config.show,
            )
            result = replay_dead_letters(app.topology, streams, options)
        except (OperationRefusedError, StreamsConfigError) as exc:
            raise dg.Failure(description=str(exc)) from exc
        data = result.to_dict()
        context.log.info(result.summary())
        context.add_output_metadata(
            {
                "result": dg.MetadataValue.json(data),
                "by_error_class": dg.MetadataValue.json(result.by_error_class),
                "replayed": result.replayed,
                "summary": dg.MetadataValue.md(f"```\n{result.summary()}\n```"),
            }
        )
        return data

    @dg.job(
        name=f"{app.name}_dlq_replay",
        description="Replay dead letters into their source topics, exactly once (dry run unless "
        "dry_run: false).",
    )
    def job() -> None:
        replay()

    return job
