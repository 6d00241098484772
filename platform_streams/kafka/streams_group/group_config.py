"""A streams group's own configuration on the broker (KIP-1071's group configs).

Under the streams protocol some settings a Kafka Streams client used to choose itself belong to
the group on the broker: ``streams.num.standby.replicas`` (broker default
``group.streams.num.standby.replicas``), ``streams.session.timeout.ms``,
``streams.heartbeat.interval.ms`` and the like. Kafka Streams 4.3 does not set them (it warns
that ``num.standby.replicas`` is ignored and points at the admin client or kafka-configs.sh);
this is that admin call: IncrementalAlterConfigs on the GROUP resource. The broker accepts it
before the group exists.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from platform_streams.kafka.errors import to_broker_error
from platform_streams.kafka.streams_group.security import security_properties

__all__ = ["set_group_configs"]


def set_group_configs(
    bootstrap: str,
    group_id: str,
    configs: Mapping[str, str],
    timeout: float = 30.0,
    *,
    security: Mapping[str, str] | None = None,
) -> None:
    """Set ``configs`` on group ``group_id`` (the others stay as they are); ``security``: the
    librdkafka connection properties (``security.protocol``, ``ssl.*``, ``sasl.*``).
    ALTER_CONFIGS on the group is the ACL this needs."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=entries)
    admin = AdminClient({**security_properties(security or {}), "bootstrap.servers": bootstrap})
    try:
        for future in admin.incremental_alter_configs([resource], request_timeout=timeout).values():
            future.result(timeout=timeout)
    except KafkaException as exc:
        raise to_broker_error(exc, f"alter configs of group {group_id!r}") from exc

