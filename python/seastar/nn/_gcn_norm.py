"""The symmetric GCN normalisation of GCNConv and APPNP, with PyG's self-loop rules.

``w'_e = d_src^-1/2 * w_e * d_dst^-1/2`` over the graph with self loops, ``d`` the weighted
in-degree (``w = 1`` without edge weights); a vertex of degree 0 gets 0. Self loops follow PyG:

* ``edge_index`` (or a ``seastar.Graph``): ``add_remaining_self_loops``: every vertex ends up
  with exactly one loop; an existing loop keeps its weight, a new one gets ``fill`` (1, or 2
  with ``improved``). As in PyG's ``gcn_norm``, without edge weights every weight is 1, the
  new loops' included, so ``improved`` changes nothing there.
* a ``torch.sparse`` adjacency: PyG adds a loop of weight ``fill`` to every vertex and the
  sparse matrix sums it with an existing diagonal entry (``A + fill * I``).
* a ``SparseTensor``: ``fill_diag``: the diagonal becomes ``fill`` (existing entries replaced).

Without per-call weights the result depends on the graph alone and is cached per graph (uid),
device and dtype; with weights (possibly learned) it is recomputed each call, O(E) torch ops,
and is differentiable in them.

Without any edge weights ``w'_e = d_src^-1/2 * d_dst^-1/2`` factors into a per-vertex
``d^-1/2``: ``gcn_norm`` then returns a ``VertexNorm`` and the propagation reads the factor at
both endpoints (``sum(e.src.d * e.src.h * e.dst.d)``), which the compiler applies once per
vertex rather than once per edge, with no per-edge weight array at all. The self loops are not
added to the graph either: ``add_remaining_self_loops`` leaves every vertex ``v`` with exactly
one loop, so over the graph as given (``c_v`` loops at ``v``)

    out_v = d_v * sum_{e = (u -> v)} d_u h_u + (1 - c_v) * d_v^2 * h_v,   d_v = (deg_v - c_v + 1)^-1/2

which needs no second graph (its adjacency would cost as much memory as the graph's own) and
equals the propagation over the graph with loops up to the order of the additions.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple, Union

import torch

from ..graph import Graph
from ._loops import loop_ids, loop_values, with_loops
from ._structure import Structure, is_sparse_tensor_like
from ._utils import GraphCache, graph_uid, per_graph


def _as_column(w: torch.Tensor, num_edges: int, layer: str) -> torch.Tensor:
    if w.dim() == 2 and w.shape[1] == 1:
        w = w.view(-1)
    if w.dim() != 1 or w.shape[0] != num_edges:
        raise ValueError(f"{layer}: edge_weight must be [E] = [{num_edges}] (one weight per edge), "
                         f"got {tuple(w.shape)}")
    return w


def edge_weights(s: Structure, edge_weight: Optional[torch.Tensor], layer: str) -> Optional[torch.Tensor]:
    """The call's per-edge weights [E]: ``edge_weight``, or a sparse adjacency's values."""
    if edge_weight is not None:
        if not isinstance(edge_weight, torch.Tensor):
            raise TypeError(f"{layer}: edge_weight must be a tensor, got {type(edge_weight).__name__}")
        return _as_column(edge_weight, s.num_edges, layer)
    if s.values is not None:
        return _as_column(s.values, s.num_edges, layer)
    return None


class VertexNorm(NamedTuple):
    """The weights ``w'_e = dinv[src] * dinv[dst]`` of an unweighted graph, kept per vertex (a
    named tuple of tensors, so torch.compile hands it to compiled code like a Structure)."""

    dinv: torch.Tensor  # [N, 1]
    loop: Optional[torch.Tensor] = None  # [num_dst, 1]: (1 - c_v) d_v^2, the added loops; None: none added


def explicit_loops(cache: GraphCache, s: Structure, norm: VertexNorm) -> Tuple[Structure, torch.Tensor]:
    """The structure with its self loops as edges and the per-edge weights [E', 1] of ``norm``
    (for what needs them per edge, e.g. edge dropout)."""
    st = s if norm.loop is None else with_loops(cache, s, s.num_dst).structure
    src, dst = st.edge_index.to(norm.dinv.device)
    return st, norm.dinv[src] * norm.dinv[dst]


def inverse_sqrt_degree(s: Structure, w: torch.Tensor) -> torch.Tensor:
    """``d^-1/2`` of every destination, ``d`` the ``w``-weighted in-degree; 0 where ``d = 0``."""
    deg = w.new_zeros(s.num_dst).index_add(0, s.edge_index[1].to(w.device), w)
    dinv = deg.pow(-0.5)
    return dinv.masked_fill(torch.isinf(dinv), 0.0)


def normalise(s: Structure, w: torch.Tensor) -> torch.Tensor:
    src, dst = s.edge_index.to(w.device)
    dinv = inverse_sqrt_degree(s, w)
    return dinv[src] * w * dinv[dst]


def gcn_norm(cache: GraphCache, s: Structure, edge_weight: Optional[torch.Tensor], add_self_loops: bool,
             improved: bool, dtype: torch.dtype, device,
             layer: str = "GCNConv") -> Tuple[Structure, Union[torch.Tensor, VertexNorm]]:
    """The structure to propagate over and its normalised weights: [E', 1], or a ``VertexNorm``
    when the graph has no edge weights."""
    w = edge_weights(s, edge_weight, layer)
    fill = 2.0 if improved else 1.0
    if w is None and s.layout is None:  # depends on the graph alone: once per graph, device and dtype
        key = ("gcn_vertex_norm", graph_uid(s.graph), s.num_src, s.num_dst, add_self_loops, str(device), dtype)
        return per_graph(cache, key, s.graph, _unweighted_norm, s.num_src, s.num_dst, add_self_loops,
                         str(device), dtype)
    if w is None:
        w = torch.ones(s.num_edges, dtype=dtype, device=device)
    w = w.to(dtype=dtype, device=device)
    st = s
    if add_self_loops:
        lg = with_loops(cache, s, s.num_dst)
        mode = {None: "remaining", "torch_sparse": "replace"}.get(s.layout, "sum")
        st = lg.structure
        w = loop_values(lg, loop_ids(cache, s, lg), w, fill, mode)
    return st, normalise(st, w).unsqueeze(-1)


def _unweighted_norm(graph, num_src: int, num_dst: int, add_self_loops: bool, device: str,
                     dtype: torch.dtype) -> Tuple[Structure, VertexNorm]:
    """The propagated structure (the graph as given) and its per-vertex factors without edge
    weights (computed in float64); with ``add_self_loops`` the loops' factor (module docstring)."""
    s = Structure(graph, num_src, num_dst, None)
    deg = graph.in_degrees().to(torch.float64)
    loop = None
    if add_self_loops:
        c = loops_per_vertex(graph, num_dst).to(torch.float64)
        deg = deg - c + 1.0
    dinv = deg.pow(-0.5).masked_fill(deg == 0, 0.0).unsqueeze(-1)
    if add_self_loops:
        loop = ((1.0 - c).unsqueeze(-1) * dinv * dinv).to(device=device, dtype=dtype)
    return s, VertexNorm(dinv.to(device=device, dtype=dtype), loop)


def loops_per_vertex(graph, num_dst: int) -> torch.Tensor:
    """How many self loops each destination has, int64 [num_dst], read off the in-adjacency the
    kernels use anyway (not ``edge_index``, which would then be kept with the graph)."""
    t = graph._g.tensors("cpu", coo=False, out=False)
    ptr, nbr = t["in_ptr"].long(), t["in_nbr"]
    centre = torch.repeat_interleave(torch.arange(num_dst), ptr[1:] - ptr[:-1], output_size=nbr.numel())
    return torch.bincount(centre[nbr == centre], minlength=num_dst)


def in_destination_order(s: Structure, w: torch.Tensor) -> Tuple[Structure, torch.Tensor]:
    """``s`` with edge ``j`` = slot ``j`` of its in-edge index, and the weights ``w`` [E, ...] in
    that order. The propagation's kernels walk each destination's in-edges and read a weight per
    edge: through the edge-id map that read is a cache miss per edge on a large graph, in this
    order a stream. Same vertices, and each vertex adds its in-edges in the same order, so the
    sums are the same."""
    eid = s.graph._g.tensors("cpu", coo=False, out=False)["in_eid"]
    return (Structure(Graph(s.graph._g.in_edge_order()), s.num_src, s.num_dst, None, None, s.layout),
            w.index_select(0, eid.to(w.device)))


def cached_normalisation(layer, edge_index, make, reorder_edges: bool = True):
    """PyG's ``cached=True`` (GCNConv, APPNP): once computed, the normalised graph is kept on
    the layer, one for an ``edge_index`` and one for a sparse adjacency, and reused whatever the
    next call passes; ``make(cache)`` computes it, with ``cache`` the layer's GraphCache, or a
    fresh one when the result is kept anyway (so that what it derives on the way, e.g. the graph
    with self loops and its edge ids, is not kept twice). Without ``cached`` nothing is kept.

    Kept per-edge weights (when the graph has edge weights, constant ones) are kept with the
    graph in destination order (``in_destination_order``), unless ``reorder_edges`` is False
    (a layer that draws per-edge random masks in the caller's edge order). Inside
    torch.compile nothing is kept on the layer: the compiled code holds the normalised graph
    as constants, made when it is traced."""
    attr = "_cached_adj_t" if is_sparse_tensor_like(edge_index) else "_cached_edge_index"
    hit = getattr(layer, attr)
    if hit is not None:
        return hit
    if not layer.cached or torch.compiler.is_compiling():
        # compiled code cannot keep what tracing made on the layer; the graph keeps it instead
        # (per_graph), and the compiled code holds it as constants
        return make(layer._graph_cache)
    s, w = make(GraphCache(4))
    if reorder_edges and isinstance(w, torch.Tensor) and not w.requires_grad and not s.graph.sources_global:
        s, w = in_destination_order(s, w)
    setattr(layer, attr, (s, w))
    return s, w
