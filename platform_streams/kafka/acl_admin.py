"""ACLs and SCRAM users through the admin API, as plain data.

An :class:`Acl` is one ``kafka-acls`` line (principal, operation, resource, pattern type,
permission); the rest of the package computes and compares them without confluent_kafka.
:class:`SecurityAdmin` creates, deletes and lists them, and creates SCRAM users, for a
principal allowed to (a super user, or ALTER on the cluster).

Why the broker's answer is turned into one line: a missing ACL should read as "this
principal may not do that to this resource", not as a librdkafka error object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from platform_streams.errors import BrokerError
from platform_streams.kafka.clients import create_admin

__all__ = ["Acl", "SecurityAdmin"]

_TIMEOUT_S = 15.0


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW/DENY rule: ``principal`` may ``operation`` on ``resource_type`` ``name``.

    ``resource_type`` is TOPIC, GROUP, TRANSACTIONAL_ID or CLUSTER (name ``kafka-cluster``);
    ``pattern`` LITERAL or PREFIXED; names as in ``kafka-acls``.
    """

    principal: str
    resource_type: str
    name: str
    pattern: str
    operation: str
    permission: str = "ALLOW"
    host: str = "*"

    def kafka_acls(self) -> str:
        """The ``kafka-acls --add`` arguments that create this ACL."""
        resource = {
            "TOPIC": f"--topic {self.name}",
            "GROUP": f"--group {self.name}",
            "TRANSACTIONAL_ID": f"--transactional-id {self.name}",
            "CLUSTER": "--cluster",
        }[self.resource_type]
        allow = "--allow" if self.permission == "ALLOW" else "--deny"
        return (
            f"{allow}-principal {self.principal} --operation {_camel(self.operation)} {resource} "
            f"--resource-pattern-type {self.pattern.lower()}"
        )

    def describe(self) -> str:
        """``WRITE on TOPIC prefixed 'orders-'`` -- the short form errors use."""
        return f"{self.operation} on {self.resource_type} {self.pattern.lower()} {self.name!r}"

    def _binding(self) -> AclBinding:
        return AclBinding(
            ResourceType[self.resource_type],
            self.name,
            ResourcePatternType[self.pattern],
            self.principal,
            self.host,
            AclOperation[self.operation],
            AclPermissionType[self.permission],
        )

    @classmethod
    def _from_binding(cls, binding: AclBinding) -> Acl:
        return cls(
            binding.principal,
            _name(binding.restype),
            binding.name,
            _name(binding.resource_pattern_type),
            _name(binding.operation),
            _name(binding.permission_type),
            binding.host,
        )


def _name(value: object) -> str:
    """An enum member's name (confluent_kafka's types also allow str/int there)."""
    return str(getattr(value, "name", value))


def _camel(operation: str) -> str:
    return "".join(part.capitalize() for part in operation.split("_"))


class SecurityAdmin:
    """Create, list and delete ACLs and SCRAM users (needs ALTER/DESCRIBE on the cluster)."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self._client = create_admin({**conf, "log_level": 0})

    def create_acls(self, acls: Iterable[Acl]) -> None:
        bindings = [acl._binding() for acl in acls]
        if bindings:
            self._wait(self._client.create_acls(bindings, request_timeout=_TIMEOUT_S), "creating ACLs")

    def delete_acls(self, acls: Iterable[Acl]) -> None:
        filters = [
            AclBindingFilter(
                b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                b.permission_type,
            )
            for b in (acl._binding() for acl in acls)
        ]
        if filters:
            self._wait(self._client.delete_acls(filters, request_timeout=_TIMEOUT_S), "deleting ACLs")

    def describe_acls(self, principal: str | None = None) -> list[Acl]:
        """Every ACL on the cluster (of ``principal`` only, when given), sorted."""
        # None matches any name, principal and host (confluent_kafka's stubs say str)
        every = AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            principal,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        try:
            bindings = self._client.describe_acls(every, request_timeout=_TIMEOUT_S).result(_TIMEOUT_S)
        except KafkaException as exc:
            raise BrokerError(f"listing ACLs failed: {exc.args[0].str() if exc.args else exc}") from exc
        return sorted(Acl._from_binding(b) for b in bindings)

    def upsert_scram_user(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
        """Create ``user`` (or set its password) for SCRAM ``mechanism``."""
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], 8192)
        change = UserScramCredentialUpsertion(user, info, password.encode())
        self._wait(
            self._client.alter_user_scram_credentials([change], request_timeout=_TIMEOUT_S),
            f"setting the SCRAM credentials of {user}",
        )

    @staticmethod
    def _wait(futures: Mapping[Any, Any] | list[Any], what: str) -> None:
        for future in futures.values() if isinstance(futures, Mapping) else futures:
            try:
                future.result(_TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else exc
                text = error.str() if hasattr(error, "str") else str(error)
                raise BrokerError(f"{what} failed: {text}") from exc
