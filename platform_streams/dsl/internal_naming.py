"""Internal resources the user did not name (KIP-1111, ``ensure_explicit_internal_resource_naming``).

A generated store, changelog or repartition topic name carries an operator index
(``KSTREAM-AGGREGATE-STATE-STORE-0000000003``), so adding an operator upstream renames it and a
deployed application silently starts from an empty store or a new topic. Kafka Streams records
each such name as the DSL generates it (``InternalTopologyBuilder.addImplicitInternalNames``,
called from ``MaterializedInternal``, ``createRepartitionedSource``, suppress, stream-stream and
versioned stream-table joins) and, at every ``build()``, refuses the topology when the setting is
on, or logs one WARN naming them when it is off (``checkUnprovidedNames``). The same places
record here, with the same conditions (a repartition topic counts as named when the grouping,
join, repartition or ``to_table`` is named, or, for aggregations, when the store is), and the
message is Kafka's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from platform_streams.errors import TopologyError

__all__ = ["ImplicitInternalNames", "InternalResourcesNaming"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class InternalResourcesNaming:
    """One operator's generated names (Kafka's ``InternalResourcesNaming``); identity-compared,
    as Kafka keeps them in a ``LinkedHashSet`` of objects without ``equals``."""

    repartition_topic: str | None = None
    changelog_topic: str | None = None
    state_store: str | None = None


class ImplicitInternalNames:
    """The generated internal names of one builder, in the order the DSL made them."""

    def __init__(self) -> None:
        self._names: list[InternalResourcesNaming] = []

    def add_store(self, store: str, *, logged: bool, with_store: bool = True) -> None:
        """A generated store name (and its changelog when logged); ``with_store=False`` records
        only the changelog (Kafka's suppression buffer)."""
        changelog = f"{store}-changelog" if logged else None
        if changelog is None and not with_store:
            return
        self._names.append(
            InternalResourcesNaming(changelog_topic=changelog, state_store=store if with_store else None)
        )

    def add_repartition(self, topic: str) -> None:
        self._names.append(InternalResourcesNaming(repartition_topic=topic))

    def message(self) -> str:
        """Kafka's list of unnamed resources (``checkUnprovidedNames``), empty if none."""
        changelogs = [n.changelog_topic for n in self._names if n.changelog_topic]
        stores = [n.state_store for n in self._names if n.state_store]
        repartitions = [n.repartition_topic for n in self._names if n.repartition_topic]
        text = ""
        if changelogs:
            text += f"Following changelog topic(s) has not been named: {', '.join(changelogs)}\n"
        if stores:
            text += f"Following state store(s) has not been named: {', '.join(stores)}\n"
        if repartitions:
            text += f"Following repartition topic(s) has not been named: {', '.join(repartitions)}\n"
        return text

    def check(self, ensure_explicit: bool) -> None:
        """Refuse (``ensure_explicit``) or warn about every generated internal name."""
        text = self.message()
        if not text:
            return
        if ensure_explicit:
            raise TopologyError(f"Invalid topology: {text}")
        log.warning(
            "Explicit naming for internal resources is currently disabled. If you want to enforce"
            " user-defined names for all internal resources, set ensure_explicit_internal_resource_naming"
            " (ensure.explicit.internal.resource.naming) to true. Note: Changing internal resource names"
            " may require a full streams application reset for an already deployed application."
            " Consult the documentation on naming operators for more details. %s",
            text,
        )
