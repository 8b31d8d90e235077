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

Without per-call weights the result depends on the graph alone and is kept by the graph, per
device and dtype; with weights (possibly learned) it is recomputed each call and is
differentiable in them: the weighted in-degree (one vertex program) and O(N + loops) torch ops.

Without any edge weights ``w'_e = d_src^-1/2 * d_dst^-1/2`` factors into a per-vertex
``d^-1/2``: ``gcn_norm`` then returns a ``VertexNorm`` and the propagation reads the factor at
both endpoints (``sum(e.src.d * e.src.h * e.dst.d)``), which the compiler applies once per
vertex rather than once per edge, with no per-edge weight array at all. The self loops are not
added to the graph either: ``add_remaining_self_loops`` leaves every vertex ``v`` with exactly
one loop, so over the graph as given (``c_v`` loops at ``v``)

    out_v = d_v * sum_{e = (u -> v)} d_u h_u + (1 - c_v) * d_v^2 * h_v,   d_v = (deg_v - c_v + 1)^-1/2

which needs no second graph (its adjacency would cost as much memory as the graph's own) and
equals the propagation over the graph with loops up to the order of the additions. GCNConv
keeps that form with edge weights (``_weighted_norm``): the weights are read as given, and the
loops' term is what the graph with loops holds at each vertex less what its own loops bring.
APPNP, which propagates K times, multiplies the factors into one weight per edge once per call
(``EdgeNorm``, in destination order, so its steps stream them); its edge dropout draws a mask
per edge of the graph with its loops as edges (``form="loops_as_edges"``).

A sampled block (a bipartite graph whose destination ``i`` is its source ``i``) has two degrees
per vertex, and GCNConv takes DGL's ``GraphConv(norm="both")`` normalisation there
(``BlockNorm``): ``w_e = dsrc[src] * ddst[dst]`` with ``dsrc = max(out-degree in the block, 1)
^-1/2`` and ``ddst = max(in-degree in the block, 1)^-1/2``. ``add_self_loops`` adds PyG's
remaining loops first, source ``i`` -> destination ``i`` for every destination, and counts them
in both degrees; like the loops of a square graph they are a per-vertex term, not edges.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple, Union

import torch

from .. import ops as ss
from ..derived_graphs import destination_ordered as derived_destination_ordered
from ..program import vertex_program
from ..reorder import destination_ordered
from ._loops import loop_ids, loop_values, self_loops, with_loops
from ..graph import tensor_of
from ..graph_ops import derived
from ._inputs import edge_weights
from ._structure import Structure, is_sparse_tensor_like


class VertexNorm(NamedTuple):
    """The weights ``w'_e = dinv[src] * w_e * dinv[dst]`` kept as per-vertex factors and the edge
    weights as given (a named tuple of tensors, so torch.compile hands it to compiled code like
    a Structure)."""

    dinv: torch.Tensor  # [N, 1]
    loop: Optional[torch.Tensor] = None  # [num_dst, 1]: the per-vertex loop term's factor; None: no loops added
    w: Optional[torch.Tensor] = None  # [E, 1]: the edge weights, in the structure's edge order; None: all 1


class EdgeNorm(NamedTuple):
    """The normalised weights ``w'_e = dinv[src] * w_e * dinv[dst]`` per edge of a structure
    whose edge ``j`` is slot ``j`` of its in-edge index (so the kernels stream them), and the
    per-vertex loop term's factor (``VertexNorm.loop``)."""

    w: torch.Tensor  # [E, 1]
    loop: torch.Tensor  # [num_dst, 1]


@vertex_program(name="gcn_in_weight")
def in_weight(v):
    """A destination's weighted in-degree: the sum of its in-edges' weights."""
    return ss.sum(e.w for e in v.in_edges())


def explicit_loops(s: Structure, norm: VertexNorm) -> Tuple[Structure, torch.Tensor]:
    """The structure with its self loops as edges and the per-edge weights [E', 1] of ``norm``
    (for what needs them per edge, e.g. edge dropout)."""
    st = s if norm.loop is None else with_loops(s, s.num_dst).structure
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


NORM_FORMS = ("vertex", "edge", "loops_as_edges")


def gcn_norm(s: Structure, edge_weight: Optional[torch.Tensor], add_self_loops: bool,
             improved: bool, dtype: torch.dtype, device, layer: str = "GCNConv", form: str = "vertex"
             ) -> Tuple[Structure, Union[torch.Tensor, VertexNorm, EdgeNorm]]:
    """The structure to propagate over and its normalised weights: a ``VertexNorm`` (the graph
    as given); with edge weights and ``form="edge"`` an ``EdgeNorm`` (the graph in destination
    order, for a layer that propagates several times), with ``form="loops_as_edges"`` the graph
    with its self loops as edges and their normalised weights [E', 1] (for a per-edge mask over
    them)."""
    if form not in NORM_FORMS:
        raise ValueError(f"gcn_norm: form={form!r}; expected one of {NORM_FORMS}")
    w = edge_weights(s, edge_weight, layer)
    fill = 2.0 if improved else 1.0
    if w is None and s.layout is None:  # depends on the graph alone: once per graph, device and dtype
        if torch.compiler.is_compiling():  # traced on the graph's tensors, for every graph alike
            return _unweighted_norm(s.graph, s.num_src, s.num_dst, add_self_loops, str(device), dtype)
        return derived(s.graph, _unweighted_norm, s.num_src, s.num_dst, add_self_loops, str(device), dtype)
    if w is None:
        w = torch.ones(s.num_edges, dtype=dtype, device=device)
    w = w.to(dtype=dtype, device=device)
    mode = {None: "remaining", "torch_sparse": "replace"}.get(s.layout, "sum")
    if form == "vertex":
        return s, _weighted_norm(s, w, add_self_loops, fill, mode)
    if form == "edge":
        return _edge_norm(s, _weighted_norm(s, w, add_self_loops, fill, mode))
    st = s
    if add_self_loops:
        lg = with_loops(s, s.num_dst)
        st = lg.structure
        w = loop_values(lg, loop_ids(s, lg), w, fill, mode)
    return st, normalise(st, w).unsqueeze(-1)


def _weighted_norm(s: Structure, w: torch.Tensor, add_self_loops: bool, fill: float,
                   mode: str) -> VertexNorm:
    """The per-vertex form with edge weights ``w`` [E] over the graph as given. Where the graph
    with loops would hold one loop of weight ``lw_v`` at ``v`` in place of the ``c_v`` loops the
    graph has (weights summing to ``s_v``, ``lw_v`` by ``mode``, see ``_loops``), the graph's own
    edges are summed as they are and the difference is a per-vertex term:

        out_v = d_v * sum_{e = (u -> v)} w_e d_u h_u + (lw_v - s_v) d_v^2 h_v,
        d_v = (sum_{e -> v} w_e + lw_v - s_v)^-1/2

    the same function as the propagation over the graph with loops (up to the order of the
    additions), with no second graph and no per-edge tensor but ``w`` itself."""
    wcol = w.unsqueeze(-1)
    deg = s.out(in_weight(s.graph, w=wcol)).squeeze(-1)
    corr = None
    if add_self_loops:
        lw, own_sum = _loop_weights(s, w, fill, mode)
        corr = lw - own_sum
        deg = deg + corr
    dinv = deg.pow(-0.5)
    dinv = dinv.masked_fill(torch.isinf(dinv), 0.0)
    # without loops the term is zero: the weighted programs always have it (one program fewer)
    loop = w.new_zeros(s.num_dst) if corr is None else corr * dinv * dinv
    return VertexNorm(dinv.unsqueeze(-1), loop.unsqueeze(-1), wcol)


def _loop_weights(s: Structure, w: torch.Tensor, fill: float, mode: str):
    """Per destination: the weight of the one loop the graph with loops holds (``fill``, or, by
    ``mode``, what the graph's own loops make of it) and the sum of the graph's own loops'."""
    lw = w.new_full((s.num_dst,), fill)
    if torch.compiler.is_compiling():
        # over every edge, the others sent to a spare row: no list of the loops, whose length
        # compiled code cannot know (the same assignments, in edge order, as below)
        src, dst = s.edge_index.to(w.device)
        row = torch.where((src == dst) & (dst < s.num_dst), dst, s.num_dst)
        spare = w.new_zeros(1)
        if mode == "remaining":
            lw = torch.cat([lw, spare]).index_put((row,), w)[:-1]
        elif mode == "sum":
            lw = torch.cat([lw, spare]).index_add(0, row, w)[:-1]
        return lw, torch.cat([w.new_zeros(s.num_dst), spare]).index_add(0, row, w)[:-1]
    edges, vertex = self_loops(s)
    edges, vertex = edges.to(w.device), vertex.to(w.device)
    own = w[edges]
    if mode == "remaining":  # PyG's assignment: with several loops at a vertex one value wins
        lw = lw.index_put((vertex,), own)
    elif mode == "sum":
        lw = lw.index_add(0, vertex, own)
    return lw, w.new_zeros(s.num_dst).index_add(0, vertex, own)


def _edge_norm(s: Structure, norm: VertexNorm) -> Tuple[Structure, EdgeNorm]:
    """``norm``'s factors multiplied into one weight per edge, in in-edge (slot) order, and the
    structure whose edge ids are those slots: read off the in-edge index (the source of each
    slot, the destination by run length), so no edge list is built."""
    device = str(norm.w.device)
    if torch.compiler.is_compiling():  # read by ops, for whatever graph comes at run time
        degree, nbr, eid = (tensor_of(s.graph, n).to(device) for n in ("in_degrees", "in_src", "in_eid"))
    else:
        degree, nbr, eid = derived(s.graph, _in_index, device)
    dinv = s.src(norm.dinv).squeeze(-1)  # a square graph's vertices: sources and centres alike
    d_dst = torch.repeat_interleave(dinv, degree, output_size=s.graph.num_edges)
    w = dinv[nbr] * norm.w.squeeze(-1)[eid] * d_dst
    return in_edge_order(s), EdgeNorm(w.unsqueeze(-1), norm.loop)


def _in_index(graph, device: str):
    """Each centre's in-degree, and each in-edge slot's source and original edge id, on ``device``."""
    t = graph._g.tensors(device, coo=False, out=False)
    return t["in_ptr"].diff(), t["in_nbr"], t["in_eid"]


def in_edge_order(s: Structure) -> Structure:
    """``s`` with edge ``j`` = slot ``j`` of its in-edge index, kept by the graph (inside compiled
    code derived by the op ``seastar::derived_graph``)."""
    if torch.compiler.is_compiling():
        return Structure(derived_destination_ordered(s.graph), s.num_src, s.num_dst, None, None, s.layout)
    return derived(s.graph, _in_edge_order, s.num_src, s.num_dst, s.layout)


def _in_edge_order(graph, num_src: int, num_dst: int, layout) -> Structure:
    return Structure(destination_ordered(graph), num_src, num_dst, None, None, layout)


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


class BlockNorm(NamedTuple):
    """DGL's ``norm="both"`` on a block: ``w_e = dsrc[src] * ddst[dst]``, each side's factor from
    its own degree in the block (module docstring)."""

    dsrc: torch.Tensor  # [num_src, 1]
    ddst: torch.Tensor  # [num_dst, 1]
    loop: Optional[torch.Tensor] = None  # [num_dst, 1]: the per-vertex loop term's factor; None: no loops added


def block_norm(s: Structure, add_self_loops: bool, dtype: torch.dtype, device) -> BlockNorm:
    """The factors of a block without edge weights, once per block, device and dtype."""
    if torch.compiler.is_compiling():  # traced on the graph's tensors, for every block alike
        return _block_norm(s.graph, s.num_dst, add_self_loops, str(device), dtype)
    return derived(s.graph, _block_norm, s.num_dst, add_self_loops, str(device), dtype)


def _block_norm(graph, num_dst: int, add_self_loops: bool, device: str, dtype: torch.dtype) -> BlockNorm:
    """With loops, over the block as given (``c_v`` loops at destination ``v``, each an edge from
    source ``v``): the block with its remaining loops has one loop at ``v`` in their place, so
    both of ``v``'s degrees change by ``1 - c_v`` and

        out_v = ddst_v * sum_{e = (u -> v)} dsrc_u h_u + (1 - c_v) * dsrc_v * ddst_v * h_v

    (``h_v`` is source ``v``'s row). The degrees are clamped to 1 as DGL does; a vertex of
    degree 0 has no edge to read its factor, so the clamp changes no output."""
    d_in = graph.in_degrees().to(torch.float64)
    d_out = graph.out_degrees().to(torch.float64)
    if add_self_loops:
        c = loops_per_vertex(graph, num_dst).to(torch.float64)
        d_in = d_in - c + 1.0
        d_out = torch.cat([d_out[:num_dst] - c + 1.0, d_out[num_dst:]])
    dsrc = d_out.clamp(min=1.0).pow(-0.5).unsqueeze(-1)
    ddst = d_in.clamp(min=1.0).pow(-0.5).unsqueeze(-1)
    loop = None
    if add_self_loops:
        loop = ((1.0 - c).unsqueeze(-1) * dsrc[:num_dst] * ddst).to(device=device, dtype=dtype)
    return BlockNorm(dsrc.to(device=device, dtype=dtype), ddst.to(device=device, dtype=dtype), loop)


def loops_per_vertex(graph, num_dst: int) -> torch.Tensor:
    """How many self loops each destination has, int64 [num_dst] (on a block: edges from source
    ``v`` to destination ``v``), read off the in-adjacency the kernels use anyway (not ``edge_index``, which would then be kept with the graph).
    Inside compiled code, from the edge list the op gives (a graph there is its tensors)."""
    if torch.compiler.is_compiling():
        src, dst = tensor_of(graph, "edge_index")
        return torch.zeros(num_dst, dtype=torch.int64).index_add_(0, dst, (src == dst).to(torch.int64))
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
    return _in_edge_order(s.graph, s.num_src, s.num_dst, s.layout), w.index_select(0, eid.to(w.device))


def cached_normalisation(layer, edge_index, make):
    """PyG's ``cached=True`` (GCNConv, APPNP): once computed, the normalised graph is kept on
    the layer, one for an ``edge_index`` and one for a sparse adjacency, and reused whatever the
    next call passes; ``make()`` computes it (what it derives on the way, e.g. the graph with self
    loops, is kept by the graph, ``graph_ops.derived``). Without ``cached`` nothing is kept on the layer.

    Constant edge weights of a ``VertexNorm`` are kept with the graph in destination order
    (``in_destination_order``; an ``EdgeNorm`` is made in that order, and per-edge weights over
    the graph with loops stay in the caller's order, in which edge dropout draws its masks).
    Inside torch.compile nothing is kept on the layer: the compiled code holds the normalised
    graph as constants, made when it is traced."""
    attr = "_cached_adj_t" if is_sparse_tensor_like(edge_index) else "_cached_edge_index"
    hit = getattr(layer, attr)
    if hit is not None:
        return hit
    if not layer.cached or torch.compiler.is_compiling():
        # compiled code cannot keep what tracing made on the layer; the graph keeps it instead
        # (graph_ops.derived), and the compiled code holds it as constants
        return make()
    s, norm = make()
    if (isinstance(norm, VertexNorm) and norm.w is not None and not norm.w.requires_grad
            and not s.graph.sources_global):
        s, w = in_destination_order(s, norm.w)
        norm = norm._replace(w=w)
    setattr(layer, attr, (s, norm))
    return s, norm
