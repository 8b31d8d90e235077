"""Shared set-up of the Python tests: import path and a set of small, tricky graphs.

Makes ``import seastar`` work from a source checkout (``<repo>/python`` is put on ``sys.path``
when the package is not installed) and lets tests import their helper modules (``models``).

Graph fixtures (all built with ``seastar.Graph.from_edge_index``, seeded, so every run sees the
same graphs):

``tricky_graph``  every graph below, untyped and typed, as a ``GraphCase(name, graph)``
``typed_graph``   only the typed variants (edge types and node types)
``small_graph``   one small graph with every hazard at once, for finite-difference checks

The hazards: isolated vertices (neither in- nor out-edges), self-loops, multi-edges (the same
(u, v) pair several times, not adjacent in edge order, so "the smallest edge id" is a real
choice), a hub vertex holding about 10% of all edges, and a graph without edges. The typed
variants use four relations, one of them without edges and one holding about 90% of them.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Callable, Dict, NamedTuple, Tuple

import pytest

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[1]
if importlib.util.find_spec("seastar") is None:
    sys.path.insert(0, str(_REPO / "python"))
if str(_HERE) not in sys.path:  # helper modules next to the tests (models.py)
    sys.path.insert(0, str(_HERE))

import torch  # noqa: E402

NUM_RELATIONS = 4
EMPTY_RELATION = 2  # no edge has this type
BIG_RELATION = 0    # about 90% of the edges have this type
NUM_NODE_TYPES = 3


class GraphCase(NamedTuple):
    name: str
    graph: "seastar.Graph"

    def __repr__(self) -> str:
        return f"GraphCase({self.name}: {self.graph!r})"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _random_edges(n_nodes: int, n_edges: int, g: torch.Generator, allow_loops: bool = False) -> torch.Tensor:
    src = torch.randint(0, n_nodes, (n_edges,), generator=g)
    dst = torch.randint(0, n_nodes, (n_edges,), generator=g)
    if not allow_loops:
        dst = torch.where(src == dst, (dst + 1) % n_nodes, dst)
    return torch.stack([src, dst])


def _isolated() -> Tuple[torch.Tensor, int]:
    """12 vertices; 8..11 touch no edge; 6 and 7 only send."""
    ei = _random_edges(6, 18, _gen(1))
    extra = torch.tensor([[6, 7, 6], [0, 3, 5]])
    return torch.cat([ei, extra], dim=1), 12


def _self_loops() -> Tuple[torch.Tensor, int]:
    """Every vertex has a self-loop, vertex 2 has two; loops are spread through the edge list."""
    n = 7
    ei = _random_edges(n, 14, _gen(2))
    loops = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 2], [0, 1, 2, 3, 4, 5, 6, 2]])
    both = torch.cat([ei, loops], dim=1)
    perm = torch.randperm(both.shape[1], generator=_gen(3))
    return both[:, perm], n


def _multi_edges() -> Tuple[torch.Tensor, int]:
    """Pairs repeated 2-4 times, interleaved with other edges (duplicates never adjacent)."""
    n = 8
    pairs = _random_edges(n, 6, _gen(4))
    reps = [2, 3, 4, 2, 3, 2]
    dup = torch.cat([pairs[:, i:i + 1].repeat(1, r) for i, r in enumerate(reps)], dim=1)
    ei = torch.cat([dup, _random_edges(n, 10, _gen(5))], dim=1)
    perm = torch.randperm(ei.shape[1], generator=_gen(6))
    return ei[:, perm], n


def _hub() -> Tuple[torch.Tensor, int]:
    """Vertex 0 receives about 10% of the edges and sends another 10%."""
    n, e = 40, 200
    ei = _random_edges(n - 1, e - 40, _gen(7)) + 1  # vertices 1..39
    g = _gen(8)
    into = torch.stack([torch.randint(1, n, (20,), generator=g), torch.zeros(20, dtype=torch.long)])
    out = torch.stack([torch.zeros(20, dtype=torch.long), torch.randint(1, n, (20,), generator=g)])
    ei = torch.cat([ei, into, out], dim=1)
    perm = torch.randperm(ei.shape[1], generator=_gen(9))
    return ei[:, perm], n


def _no_edges() -> Tuple[torch.Tensor, int]:
    return torch.zeros((2, 0), dtype=torch.long), 5


def _mixed() -> Tuple[torch.Tensor, int]:
    """All hazards in one graph: isolated vertices 10, 11; loops; duplicates; hub 0."""
    n = 12
    g = _gen(10)
    base = _random_edges(10, 30, g)
    hub_in = torch.stack([torch.randint(1, 10, (5,), generator=g), torch.zeros(5, dtype=torch.long)])
    loops = torch.tensor([[3, 3, 5, 0], [3, 3, 5, 0]])
    dups = torch.tensor([[1, 1, 1, 7, 7], [4, 4, 4, 2, 2]])
    ei = torch.cat([base, hub_in, loops, dups], dim=1)
    perm = torch.randperm(ei.shape[1], generator=_gen(11))
    return ei[:, perm], n


def _edge_types(num_edges: int, seed: int) -> torch.Tensor:
    """About 90% BIG_RELATION, the rest spread over the other relations except EMPTY_RELATION."""
    g = _gen(seed)
    t = torch.full((num_edges,), BIG_RELATION, dtype=torch.long)
    others = [r for r in range(NUM_RELATIONS) if r not in (BIG_RELATION, EMPTY_RELATION)]
    n_other = max(len(others), round(0.1 * num_edges)) if num_edges else 0
    pos = torch.randperm(num_edges, generator=g)[:n_other]
    t[pos] = torch.tensor(others)[torch.arange(n_other) % len(others)]
    return t


def _node_types(num_nodes: int, seed: int) -> torch.Tensor:
    t = torch.randint(0, NUM_NODE_TYPES, (num_nodes,), generator=_gen(seed))
    t[: min(NUM_NODE_TYPES, num_nodes)] = torch.arange(min(NUM_NODE_TYPES, num_nodes))  # every type used
    return t


_UNTYPED: Dict[str, Callable] = {
    "isolated": _isolated,
    "self_loops": _self_loops,
    "multi_edges": _multi_edges,
    "hub": _hub,
    "no_edges": _no_edges,
    "mixed": _mixed,
}
_TYPED_BASES = ("multi_edges", "hub", "no_edges", "mixed")


def build_graph(name: str) -> "seastar.Graph":
    """The graph called ``name`` (an untyped name, or ``typed_<untyped name>``)."""
    import seastar as ss  # here, not at the top: test files that need no extension still collect
    typed = name.startswith("typed_")
    ei, n = _UNTYPED[name[len("typed_"):] if typed else name]()
    if not typed:
        return ss.Graph.from_edge_index(ei, num_nodes=n)
    seed = 100 + list(_UNTYPED).index(name[len("typed_"):])
    return ss.Graph.from_edge_index(ei, num_nodes=n, edge_type=_edge_types(ei.shape[1], seed),
                                    node_type=_node_types(n, seed + 1), num_edge_types=NUM_RELATIONS,
                                    num_node_types=NUM_NODE_TYPES)


UNTYPED_GRAPH_NAMES = list(_UNTYPED)
TYPED_GRAPH_NAMES = [f"typed_{b}" for b in _TYPED_BASES]
ALL_GRAPH_NAMES = UNTYPED_GRAPH_NAMES + TYPED_GRAPH_NAMES


@pytest.fixture(scope="session", params=ALL_GRAPH_NAMES)
def tricky_graph(request) -> GraphCase:
    return GraphCase(request.param, build_graph(request.param))


@pytest.fixture(scope="session", params=TYPED_GRAPH_NAMES)
def typed_graph(request) -> GraphCase:
    return GraphCase(request.param, build_graph(request.param))


@pytest.fixture(scope="session")
def small_graph() -> GraphCase:
    """Typed, with an isolated vertex, a self-loop, duplicated edges and a hub; 7 vertices, 16 edges."""
    src = [1, 2, 3, 4, 5, 2, 2, 3, 0, 2, 4, 1, 5, 0, 3, 1]
    dst = [0, 0, 0, 0, 0, 1, 3, 3, 4, 1, 5, 2, 0, 4, 1, 0]
    # vertex 6 is isolated; 1->0, 5->0, 2->1 and 0->4 appear twice; 3->3 is a loop; 0 is the hub
    ei = torch.tensor([src, dst])
    etype = torch.tensor([0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0, 0, 3])
    ntype = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    import seastar as ss
    return GraphCase("small", ss.Graph.from_edge_index(ei, num_nodes=7, edge_type=etype, node_type=ntype,
                                                       num_edge_types=NUM_RELATIONS, num_node_types=NUM_NODE_TYPES))


@pytest.fixture(scope="session")
def graph_factory():
    """``graph_factory(name)`` builds any named graph (see ``ALL_GRAPH_NAMES``)."""
    return build_graph


@functools.lru_cache(maxsize=None)
def fused_available() -> bool:
    """Whether this build runs the fused backend (tests forcing it skip where it does not)."""
    import seastar as ss
    from seastar.nn.gcn_conv import weighted_sum
    g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    try:
        weighted_sum(g, backend="fused", h=torch.ones(2, 3), w=torch.ones(2, 1))
        return True
    except NotImplementedError:
        return False
