"""Who hosts what: ``HostInfo``, ``KeyQueryMetadata``, ``StreamsMetadata``.

Kafka Streams' names for the answers of ``query_metadata_for_key`` (which instance owns
a key's partition, which hold standbys) and ``metadata_for_all_clients`` (every instance
with its tasks). Hosts are the instances' ``application_server`` addresses.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HostInfo", "KeyQueryMetadata", "StreamsMetadata", "advertised_host"]


@dataclass(frozen=True, slots=True, order=True)
class HostInfo:
    """An instance's ``host:port`` (its ``application_server``)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> HostInfo:
        """``host:port`` or ``[v6]:port``; raises ValueError otherwise."""
        host, sep, port = text.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {text!r}")
        return cls(host, int(port))

    @classmethod
    def unavailable(cls) -> HostInfo:
        """Kafka Streams' ``HostInfo.unavailable()``: no instance hosts it right now."""
        return cls("unavailable", -1)

    def is_available(self) -> bool:
        return self.port >= 0

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class KeyQueryMetadata:
    """Where a key lives: the active host, the standby hosts and the store partition.

    ``reason`` says why it is not available when that is not a passing state (the store's
    keys are not murmur2-placed: no single partition can be named).
    """

    active_host: HostInfo
    standby_hosts: frozenset[HostInfo]
    partition: int
    reason: str = ""

    @classmethod
    def not_available(cls, partition: int = -1, reason: str = "") -> KeyQueryMetadata:
        """No instance is known to host the key's partition (e.g. during a rebalance), or
        (with ``reason``) no partition can be named for the key at all."""
        return cls(HostInfo.unavailable(), frozenset(), partition, reason)

    def is_available(self) -> bool:
        return self.active_host.is_available()

    def to_dict(self) -> dict[str, Any]:
        return {
            "active_host": str(self.active_host) if self.is_available() else None,
            "standby_hosts": sorted(str(h) for h in self.standby_hosts),
            "partition": self.partition,
            **({"reason": self.reason} if self.reason else {}),
        }


@dataclass(frozen=True, slots=True)
class StreamsMetadata:
    """One instance: its host, the stores it hosts and its active/standby tasks."""

    host_info: HostInfo
    client_id: str
    state: str
    active_tasks: frozenset[str] = field(default_factory=frozenset)
    standby_tasks: frozenset[str] = field(default_factory=frozenset)
    state_store_names: frozenset[str] = field(default_factory=frozenset)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": str(self.host_info),
            "client_id": self.client_id,
            "state": self.state,
            "active_tasks": sorted(self.active_tasks),
            "standby_tasks": sorted(self.standby_tasks),
            "state_store_names": sorted(self.state_store_names),
        }


def advertised_host(application_server: str | None, bound: HostInfo | None) -> HostInfo | None:
    """The address other instances reach this one at: ``application_server`` if set, else
    the HTTP endpoint's bound address (a wildcard bind advertises the host name)."""
    if application_server:
        return HostInfo.parse(application_server.split("://", 1)[-1])
    if bound is None:
        return None
    if bound.host in ("0.0.0.0", "::", ""):
        return HostInfo(socket.gethostname(), bound.port)
    return bound
