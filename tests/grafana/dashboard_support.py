"""Reading the Grafana dashboards as Grafana does: panels, queries, template variables.

:func:`expressions` lists every PromQL expression a dashboard sends (panel targets and the
``label_values()`` queries of its variables); :func:`substitute` replaces template variables
the way Grafana's Prometheus datasource does before sending a query; :func:`metric_names`
finds the metric names an expression reads, so a test can compare them with what a worker
really exports on ``/metrics``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "grafana" / "dashboards"

#: Grafana's built-in interval variables, as it would fill them for a Prometheus that
#: scrapes every second (the test's): $__rate_interval is at least four scrape intervals.
BUILTINS = {"__rate_interval": "10s", "__interval": "2s", "__range": "1m"}

_LABEL_VALUES = re.compile(
    r"^\s*label_values\(\s*(?:(?P<match>.+),\s*)?(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$"
)
_VARIABLE = re.compile(
    r"\$\{(?P<braced>[a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$(?P<bare>[a-zA-Z_][a-zA-Z0-9_]*)"
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?!\w)(\s*\()?")
_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "inf",
        "nan",
    }
)


@dataclass(frozen=True)
class Expression:
    """One PromQL expression of a dashboard and where it is."""

    dashboard: str
    where: str
    expr: str


def load_dashboards() -> dict[str, dict[str, Any]]:
    """File name -> parsed dashboard JSON."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(dashboard["templating"]["list"])


def variable_query(variable: Mapping[str, Any]) -> str:
    query = variable["query"]
    return str(query["query"] if isinstance(query, Mapping) else query)


def parse_label_values(query: str) -> tuple[str, str]:
    """``label_values(match, label)`` -> (match, label)."""
    found = _LABEL_VALUES.match(query)
    assert found is not None and found.group("match"), f"not a label_values(metric, label) query: {query!r}"
    return found.group("match"), found.group("label")


def expressions(name: str, dashboard: Mapping[str, Any]) -> list[Expression]:
    """Every PromQL expression of the dashboard: panel targets, then variable queries."""
    found = [
        Expression(name, f"panel {panel['title']!r} target {target['refId']}", target["expr"])
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
    ]
    for variable in variables(dashboard):
        if variable["type"] == "query":
            found.append(
                Expression(
                    name, f"variable ${variable['name']}", parse_label_values(variable_query(variable))[0]
                )
            )
    return found


def referenced_variables(text: str) -> set[str]:
    return {m.group("braced") or m.group("bare") for m in _VARIABLE.finditer(text)}


def substitute(text: str, values: Mapping[str, list[str]]) -> str:
    """Replace ``$var`` / ``${var}`` as Grafana does: one value as is, several as ``(a|b)``."""

    def one(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("bare")
        if name in BUILTINS:
            return BUILTINS[name]
        chosen = values[name]
        return chosen[0] if len(chosen) == 1 else "(" + "|".join(chosen) + ")"

    return _VARIABLE.sub(one, text)


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` reads (functions, keywords, labels and literals excluded)."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("{}", text)
    text = _GROUPING.sub("", text)
    text = _RANGE.sub("", text)
    names = set()
    for match in _IDENT.finditer(text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names
