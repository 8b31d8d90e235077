"""The relational layers' toolkit (RGCNConv, HGTConv and their dict forms).

Per-graph structure, computed once per graph and kept by it (``graph_ops.derived``): each edge's
relation, the graph in (destination, relation) order, the per-relation normalisation. (The
distinct (source, relation) *pairs* of the transform-then-aggregate path are in
``relation_pairs``, vertices grouped by node type for typed linears in ``node_types``.) And the
one cost model by which the layers choose between transforming per edge and per (source,
relation) pair: ``per_edge_cost``, ``per_pair_cost`` and ``cheapest``, used by
``RGCNConv.mode_costs`` (which adds its per-run and per-basis paths) and ``HGTConv.mode_costs``.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch

from ..derived_graphs import destination_ordered as derived_order
from ..graph import Graph, tensor_of
from ..graph_ops import derived
from ..reorder import destination_ordered

MODES = ("auto", "per_edge", "per_pair")  # the paths of both relational layers (RGCNConv adds its own)


# ---- the cost model --------------------------------------------------------------------------------
#
# One model for every relational layer: a path's cost per training step, in multiply-adds of a
# dense GEMM (torch.mm), from the work the layer counts for it. A multiply-add of the generated
# per-edge matrix-vector product or outer product (W_r streamed from L2, the row gathered) costs
# MATVEC_COST GEMM multiply-adds, and a float of a run or pair row moved by index_add_ /
# index_select / the chunked aggregation ROW_COST; measured with benchmarks/bench_typed_paths.py
# (R-GCN and HGT paths timed against each other on random typed graphs, 2k-200k vertices, 200k
# edges, F=16 and 64, one thread) and bench_rgcn.py. The pair path alone holds O(P*F) floats
# from forward to backward, so it must win by PAIR_MARGIN.
MATVEC_COST = 1.25
ROW_COST = 20
PAIR_MARGIN = 1.1


def passes(x_grad: bool) -> int:
    """Forward, the parameters' gradient, and (when the input needs one) the input's."""
    return 3 if x_grad else 2


def per_edge_cost(num_edges: int, macs_per_edge: int, x_grad: bool, row_floats: int = 0) -> int:
    """A typed vertex program: ``macs_per_edge`` multiply-adds of the generated kernel per edge and
    pass; with ``x_grad``, the input's gradient (a traversal of the out-edges, each reading its
    relation's matrix transposed and a destination's gradient row) also moves ``row_floats`` per
    edge at the cost of a row (bench_typed_paths.py: that pass costs a fixed amount per edge
    beyond its multiply-adds, which dominates at small widths)."""
    return int(MATVEC_COST * passes(x_grad) * num_edges * macs_per_edge) + (ROW_COST * num_edges * row_floats
                                                                            if x_grad else 0)


def per_pair_cost(num_pairs: int, macs_per_pair: int, row_floats: int, x_grad: bool) -> int:
    """Transform each (source, relation) pair once by a dense product (``macs_per_pair`` per pair
    and pass), moving its ``row_floats`` in and out three times (gather, scatter, the backward's
    gather of the gradient)."""
    return passes(x_grad) * num_pairs * macs_per_pair + ROW_COST * 3 * num_pairs * row_floats


# Compiled code serves graphs of every size, so where eager code chooses a path by the graph's
# sizes it chooses by the sizes typical of the graph's kind (choosing by the sizes given would be
# a guard, and a recompile wherever the choice flips).
TYPICAL_FANOUT = 10


def typical_sizes(bipartite: bool, num_relations: int) -> Tuple[int, int]:
    """``(edges, distinct (source, relation) pairs)`` of a graph typical of its kind: a sampled
    block of ``TYPICAL_FANOUT`` in-edges per destination, each from a source of its own (every
    pair distinct), or a square graph of that mean degree whose out-edges take random relations
    (a vertex's expected distinct relations, ``R (1 - (1 - 1/R)^deg)``)."""
    n = 1000
    edges = TYPICAL_FANOUT * n
    if bipartite:
        return edges, edges
    r = max(1, num_relations)
    return edges, min(edges, int(n * r * (1 - (1 - 1 / r) ** TYPICAL_FANOUT)))


def cheapest(costs: Dict[str, int]) -> str:
    """The path of least cost, ``per_pair`` weighted by PAIR_MARGIN; ties go to the path listed first."""
    weighted = {k: (int(c * PAIR_MARGIN) if k == "per_pair" else c) for k, c in costs.items()}
    return min(weighted, key=weighted.get)


# ---- per-graph structure, computed once per graph and cached by graph uid -------------------------

def edge_types(graph: Graph, num_relations: int, layer: str) -> torch.Tensor:
    """``graph.edge_type`` as int64; an untyped graph is one relation (all zeros) when R == 1."""
    if not graph.has_edge_types:
        if num_relations != 1:
            raise ValueError(f"{layer}: the graph has no edge types but the layer has {num_relations} "
                             f"relations; build it with edge_type=... (Graph.from_edge_index)")
        return torch.zeros(graph.num_edges, dtype=torch.int64)
    if graph.num_edge_types != num_relations:
        raise ValueError(f"{layer}: the graph has {graph.num_edge_types} edge types but the layer has "
                         f"{num_relations} relations")
    return tensor_of(graph, "edge_type").long()


def csc_ordered(graph: Graph, num_relations: int, layer: str = "RGCNConv") -> Graph:
    """``graph`` with its edges renumbered in (destination, relation) order, kept by the graph.

    The same vertices, edges and types; only edge ids change, so that edge ``j`` of the
    type-sorted CSC has id ``j``. A destination-parallel kernel then reads per-edge data (the
    relation, ``norm``) as a stream instead of one random access per edge through the edge-id
    map, which is what bounds a kernel with little arithmetic per edge. Layers bind their own
    per-edge tensors (``norm``), computed on this graph, so nothing the user passed is permuted.
    """
    if torch.compiler.is_compiling():  # derived per call by an op: compiled code serves every graph
        if not graph.has_edge_types:
            return graph
        edge_types(graph, num_relations, layer)
        return derived_order(graph)
    return derived(graph, _csc_ordered, num_relations, layer)


def _csc_ordered(graph: Graph, num_relations: int, layer: str) -> Graph:
    if not graph.has_edge_types:
        return graph
    edge_types(graph, num_relations, layer)  # validates the types against the relations
    return destination_ordered(graph)  # the in-edge index is by destination, then type


def relation_norm(graph: Graph, num_relations: int, device, dtype,
                  layer: str = "RGCNConv") -> torch.Tensor:
    """``norm[e] = 1 / |N_r(i)|`` [E, 1]: one over the number of in-edges of ``e``'s destination
    ``i`` with ``e``'s relation ``r`` (multi-edges count, as in PyG), kept by the graph."""
    if torch.compiler.is_compiling():  # traced on the graph's tensors: no constant of one graph's values
        return _relation_norm(graph, num_relations, str(device), dtype, layer)
    return derived(graph, _relation_norm, num_relations, str(device), dtype, layer)


def _relation_norm(graph: Graph, num_relations: int, device: str, dtype, layer: str) -> torch.Tensor:
    t = edge_types(graph, num_relations, layer)
    dst = graph.edge_index[1].long()
    key = dst * num_relations + t
    # a count per (destination, relation) by index_add_, whose size is the graph's (bincount's
    # would depend on the ids' values, which compiled code cannot know)
    count = torch.zeros(graph.num_nodes * num_relations, dtype=torch.int64).index_add_(0, key, torch.ones_like(key))
    return (1.0 / count[key].to(torch.float64)).unsqueeze(-1).to(device=device, dtype=dtype)
