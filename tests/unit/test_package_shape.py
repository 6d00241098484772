"""The package's shape: no module over 500 lines, no import cycle between its packages.

Both lists below are explicit and may only shrink: a module that grows past the limit, or a
new cycle between packages, fails here with its name; one that is fixed fails too, until its
entry is removed, so the lists always say what is true today. Pure and fast (it parses the
package's sources, imports nothing).

"Package" means a subpackage of ``platform_streams`` (``platform_streams.state``) or a module
at its top level (``platform_streams.errors``). Imports under ``if TYPE_CHECKING:`` do not
count (they never run); imports inside functions do (they are dependencies all the same).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "platform_streams"
MAX_LINES = 500

#: modules over MAX_LINES today, and why each is still there (remove an entry when it shrinks)
OVERSIZED = {
    "platform_streams/config/streams_config.py": "the StreamsConfig model lists every setting with "
    "its check; its field groups (client, state, processing) are still one pydantic model",
    "platform_streams/runtime/workers/worker.py": "the loop with its clients: joining, checking and "
    "repairing the classic group, serving it while stopping, polling and routing (the tasks are its "
    "TaskManager's)",
    "platform_streams/runtime/producing/streams_producer.py": "Kafka Streams keeps everything about "
    "exactly-once in StreamsProducer; the held-back sends could be a module of their own",
    "platform_streams/processor/fusion.py": "the fused fast paths; one compiled-task layer above "
    "state and processor is to replace them",
    "platform_streams/server/routes.py": "every route of the worker HTTP API in one table",
}

#: import cycles between packages today, and why (remove an entry when it is broken)
CYCLES = {
    frozenset({"platform_streams.kafka", "platform_streams.serde"}): "the schema-registry serdes live "
    "in kafka/ (they use the Kafka client) and serde/ loads them on first use",
    frozenset(
        {"platform_streams.processor", "platform_streams.state", "platform_streams.topology"}
    ): "stores take TaskContext, FusedFragment and records from processor (the fused fast paths), "
    "and topology builds processor nodes",
    frozenset({"platform_streams", "platform_streams.kafka_streams", "platform_streams.metrics"}): "the "
    "metrics collector reads the package's __version__ from its top level",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _package(module: str) -> str:
    """``platform_streams.state.wrappers.metered`` -> ``platform_streams.state``."""
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> set[str]:
    source = path.read_text(encoding="utf-8")
    if "platform_streams" not in source:
        return set()
    names: set[str] = set()
    todo: list[ast.AST] = [ast.parse(source)]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)  # the body runs only for the type checker
            continue
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        else:  # imports are statements: expressions need no look
            todo.extend(
                child
                for child in ast.iter_child_nodes(node)
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))
            )
    return {name for name in names if name == "platform_streams" or name.startswith("platform_streams.")}


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in _modules().items():
        for target in _imports(path):
            if _package(module) != _package(target):
                graph[_package(module)].add(_package(target))
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one package (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_is_over_500_lines_except_the_listed_ones() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in _modules().values()
    }
    over = {name for name, lines in sizes.items() if lines > MAX_LINES}
    assert sorted(over - OVERSIZED.keys()) == [], f"modules over {MAX_LINES} lines: split them"
    assert sorted(OVERSIZED.keys() - over) == [], "no longer over the limit: remove from OVERSIZED"


def test_no_import_cycle_between_packages_except_the_listed_ones() -> None:
    cycles = _cycles(_package_graph())
    assert sorted(map(sorted, cycles - CYCLES.keys())) == [], "new import cycle between packages"
    assert sorted(map(sorted, CYCLES.keys() - cycles)) == [], "cycle broken: remove it from CYCLES"


def test_the_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == {frozenset({"a", "b", "c"})}
