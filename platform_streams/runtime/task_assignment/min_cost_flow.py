"""Min-cost flow by cycle cancelling: Kafka Streams' ``assignment.Graph``, step for step.

The rack-aware optimizer (:mod:`.rack_aware`) solves its task placement as a min-cost
flow, as Kafka Streams does. This is a port of Kafka's own solver rather than a different
exact method because min-cost flows have ties (two placements of the same cost), and
which of the optimal placements is chosen decides which tasks move: following Kafka's
iteration order exactly -- nodes and each node's edges by id, the dummy source first,
Bellman-Ford relaxation in that order, Ford-Fulkerson by breadth-first search -- gives
the placement Kafka gives, not just one of the same cost.

One change that cannot alter a result: Bellman-Ford stops early after a pass that
relaxed nothing (no later pass could relax anything either, so Kafka's full run would
find no cycle either). It matters here, where a pass costs Python time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["Edge", "Graph"]

#: Kafka's dummy source of the negative-cycle search is ``null``, sorted before every node
_DUMMY = -(1 << 62)


@dataclass(eq=False)
class Edge:
    """An edge of the graph (``flow``) or of its residual graph (``residual``)."""

    destination: int
    capacity: int
    cost: int
    residual: int
    flow: int
    forward: bool = True
    counter: Edge | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.capacity < 0:
            raise ValueError("Edge capacity cannot be negative")
        if self.flow > self.capacity:
            raise ValueError(f"Edge flow {self.flow} cannot exceed capacity {self.capacity}")


class Graph:
    """A flow network over int nodes with a source and a sink (Kafka's ``Graph<Integer>``)."""

    def __init__(self, *, residual: bool = False) -> None:
        self._adj: dict[int, dict[int, Edge]] = {}
        self._nodes: set[int] = set()
        self._residual = residual
        self.source = 0
        self.sink = 0

    def add_edge(self, u: int, v: int, capacity: int, cost: int, flow: int) -> None:
        self._add(u, Edge(v, capacity, cost, capacity - flow, flow))

    def _add(self, u: int, edge: Edge) -> None:
        if not self._residual and u in self._adj.get(edge.destination, {}):
            raise ValueError(
                f"There is already an edge from {edge.destination} to {u}. Can not add an edge from {u} "
                f"to {edge.destination} since there will create a cycle between two nodes"
            )
        self._adj.setdefault(u, {})[edge.destination] = edge
        self._nodes.add(u)
        self._nodes.add(edge.destination)

    def edges(self, node: int) -> list[Edge]:
        """The node's outgoing edges, by destination."""
        out = self._adj.get(node, {})
        return [out[d] for d in sorted(out)]

    def _ordered(self) -> list[tuple[int, Edge]]:
        """Every edge as (start, edge), by start then destination (Kafka's TreeMaps)."""
        return [(u, self._adj[u][v]) for u in sorted(self._adj) for v in sorted(self._adj[u])]

    def total_cost(self) -> int:
        return sum(edge.cost * edge.flow for _u, edge in self._ordered())

    def flow(self) -> int:
        return sum(edge.flow for edge in self._adj.get(self.source, {}).values())

    # -- residual graph ------------------------------------------------------------------

    def residual_graph(self) -> Graph:
        if self._residual:
            return self
        residual = Graph(residual=True)
        for u, edge in self._ordered():
            fwd = Edge(edge.destination, edge.capacity, edge.cost, edge.capacity - edge.flow, edge.flow)
            back = Edge(u, edge.capacity, -edge.cost, edge.flow, 0, forward=False)
            fwd.counter, back.counter = back, fwd
            residual._add(u, fwd)
            residual._add(edge.destination, back)
        residual.source, residual.sink = self.source, self.sink
        return residual

    def _copy_flows_from(self, residual: Graph) -> None:
        for u, edge in self._ordered():
            mirror = residual._adj[u][edge.destination]
            edge.flow, edge.residual = mirror.flow, mirror.residual

    # -- min-cost flow ---------------------------------------------------------------------

    def solve_min_cost_flow(self) -> None:
        """Cancel negative cycles of the residual graph until none is left (the flow given
        as the edges' initial ``flow`` must be valid: it stays a flow of the same value)."""
        self._validate_flow()
        residual = self.residual_graph()
        # a dummy node with an edge to every node finds cycles anywhere in the graph
        residual._adj[_DUMMY] = {n: Edge(n, 1, 0, 1, 0) for n in sorted(residual._nodes)}
        residual._nodes.add(_DUMMY)
        residual._cancel_negative_cycles()
        del residual._adj[_DUMMY]
        residual._nodes.discard(_DUMMY)
        self._copy_flows_from(residual)

    def _cancel_negative_cycles(self) -> None:
        """Kafka's cancelNegativeCycles over flat arrays (the edges in Kafka's order): the
        same passes, relaxations and cycles, at a fraction of the interpreter's cost."""
        ordered = self._ordered()
        nodes = sorted(self._nodes)
        index = {node: i for i, node in enumerate(nodes)}
        slot = {id(edge): k for k, (_u, edge) in enumerate(ordered)}
        starts = [index[u] for u, _e in ordered]
        ends = [index[e.destination] for _u, e in ordered]
        costs = [e.cost for _u, e in ordered]
        residual = [e.residual for _u, e in ordered]
        flow = [e.flow for _u, e in ordered]
        forward = [e.forward for _u, e in ordered]
        counter = [slot[id(e.counter)] if e.counter is not None else -1 for _u, e in ordered]
        dummy = index[_DUMMY]
        while True:
            parent_edge = [-1] * len(nodes)
            node = _detect_negative_cycle(len(nodes), dummy, starts, ends, costs, residual, parent_edge)
            if node is None:
                break
            seen: set[int] = set()
            while node not in seen:
                seen.add(node)
                node = starts[parent_edge[node]]
            cycle = [parent_edge[node]]
            current = starts[parent_edge[node]]
            while current != node:
                cycle.append(parent_edge[current])
                current = starts[parent_edge[current]]
            amount = min(residual[k] for k in cycle)
            for k in cycle:
                residual[k] -= amount
                if forward[k]:
                    flow[k] += amount
                c = counter[k]
                residual[c] += amount
                if forward[c] and flow[c] >= amount:
                    flow[c] -= amount
        for k, (_u, edge) in enumerate(ordered):
            edge.residual, edge.flow = residual[k], flow[k]

    @staticmethod
    def _push(edge: Edge, amount: int) -> None:
        counter = edge.counter
        assert counter is not None
        edge.residual -= amount
        if edge.forward:
            edge.flow += amount
        counter.residual += amount
        if counter.forward and counter.flow >= amount:
            counter.flow -= amount

    # -- max flow ----------------------------------------------------------------------------

    def calculate_max_flow(self) -> int:
        """Ford-Fulkerson from the edges' flows; returns the flow out of the source."""
        residual = self.residual_graph()
        residual._ford_fulkerson()
        self._copy_flows_from(residual)
        return self.flow()

    def _ford_fulkerson(self) -> None:
        while True:
            parents = self._bfs()
            if parents is None:
                return
            amount: int | None = None
            node = self.sink
            while node != self.source:
                residual = self._adj[parents[node]][node].residual
                amount = residual if amount is None else min(amount, residual)
                node = parents[node]
            assert amount is not None
            node = self.sink
            while node != self.source:
                self._push(self._adj[parents[node]][node], amount)
                node = parents[node]

    def _bfs(self) -> dict[int, int] | None:
        parents: dict[int, int] = {}
        visited = {self.source}
        queue = deque([self.source])
        while queue:
            node = queue.popleft()
            for edge in self.edges(node):
                nxt = edge.destination
                if nxt in visited or edge.residual <= 0:
                    continue
                parents[nxt] = node
                if nxt == self.sink:
                    return parents
                queue.append(nxt)
                visited.add(nxt)
        return None

    def _validate_flow(self) -> None:
        """The initial flow is a flow: what enters a node leaves it, source out = sink in."""
        inflow: dict[int, int] = {}
        outflow: dict[int, int] = {}
        for u, edge in self._ordered():
            if u == self.sink:
                raise ValueError(f"Sink node {self.sink} shouldn't have output")
            if edge.destination == self.source:
                raise ValueError(f"Source node {self.source} shouldn't have input {u}")
            outflow[u] = outflow.get(u, 0) + edge.flow
            inflow[edge.destination] = inflow.get(edge.destination, 0) + edge.flow
        for node, value in inflow.items():
            if node not in (self.source, self.sink) and outflow.get(node) != value:
                raise ValueError(
                    f"Input flow for node {node} is {value} which doesn't match "
                    f"output flow {outflow.get(node)}"
                )
        if outflow.get(self.source) != inflow.get(self.sink):
            raise ValueError(
                f"Output flow for source {self.source} is {outflow.get(self.source)} which doesn't match "
                f"input flow {inflow.get(self.sink)} for sink {self.sink}"
            )


def _detect_negative_cycle(
    count: int,
    source: int,
    starts: list[int],
    ends: list[int],
    costs: list[int],
    residual: list[int],
    parent_edge: list[int],
) -> int | None:
    """Kafka's detectNegativeCycles (Bellman-Ford from ``source``, edges in order, ``count``
    passes): the node relaxed in the last pass, or None. ``parent_edge`` gets, per node,
    the edge that last relaxed it. Stops after a pass that relaxed nothing (a later pass
    could relax nothing either, so the answer is the same)."""
    live = [(starts[k], ends[k], costs[k], k) for k in range(len(starts)) if residual[k] != 0]
    unreached = float("inf")
    distance: list[float] = [unreached] * count
    distance[source] = 0
    last = count - 1
    for i in range(count):
        relaxed = False
        for start, end, cost, k in live:
            d_start = distance[start]
            if d_start == unreached:
                continue
            candidate = d_start + cost
            if candidate < distance[end]:
                distance[end] = candidate
                parent_edge[end] = k
                relaxed = True
                if i == last:
                    return end
        if not relaxed:
            return None
    return None
