"""RGCNConv: the relational graph convolution of Schlichtkrull et al. (ESWC 2018), PyG semantics.

The typed-graph machinery it shares with ``HGTConv`` (per-relation normalisation, the pair graph,
the CSC-ordered copy, node-type groups, the cost model) lives in ``relations``; the
aggregate-then-transform path in ``rgcn_runs``.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

import torch
from torch import nn

from .. import ops as ss
from ..graph import Graph
from ..graph_ops import derived
from ..program import vertex_program
from ._precision import float32_inside
from ._programs import neighbour_sum, weighted_sum
from ._structure import pad_rows
from ._typed_inputs import typed_call
from ._column_sum import bias_add
from ._utils import dense, glorot, zeros
from .rgcn_runs import count_runs, graph_run_plans, per_run_conv
from .rgcn_runs_op import per_run_op
from .relation_pairs import relation_matmul, relation_pairs, relation_rows
from .relations import (MATVEC_COST, MODES, PAIR_MARGIN, ROW_COST, cheapest, csc_ordered,  # noqa: F401
                          edge_types, per_edge_cost, per_pair_cost, relation_norm)

RGCN_MODES = MODES + ("per_run", "per_basis")


# ---- the typed vertex programs (one matrix-vector product per edge) ------------------------------

@vertex_program(name="rgcn_typed_mean")
def rgcn_typed_weighted(v, W):
    """sum over in-edges of norm[e] * (x[src] @ W[type(e)])."""
    return ss.sum(e.src.x @ W[e.type] * e.norm for e in v.in_edges())


@vertex_program(name="rgcn_typed_add")
def rgcn_typed_sum(v, W):
    """sum over in-edges of x[src] @ W[type(e)]."""
    return ss.sum(e.src.x @ W[e.type] for e in v.in_edges())


# ---- the basis programs (aggregate per basis, transform once per vertex) ---------------------------

@vertex_program(name="rgcn_basis_mean")
def rgcn_basis_weighted(v, comp):
    """[B, F] per vertex: sum over in-edges of norm[e] * comp[type(e), b] * x[src]."""
    return ss.sum(comp[e.type] * e.src.x * e.norm for e in v.in_edges())


@vertex_program(name="rgcn_basis_add")
def rgcn_basis_sum(v, comp):
    """[B, F] per vertex: sum over in-edges of comp[type(e), b] * x[src]."""
    return ss.sum(comp[e.type] * e.src.x for e in v.in_edges())


def _num_runs(graph: Graph, num_relations: int) -> int:
    src, dst = graph.edge_index.long()
    return count_runs(dst, edge_types(graph, num_relations, "RGCNConv"), graph.num_nodes)


# ---- the layer -------------------------------------------------------------------------------------

class RGCNConv(nn.Module):
    r"""Relational graph convolution (Schlichtkrull et al., "Modeling Relational Data with Graph
    Convolutional Networks", ESWC 2018), with PyTorch Geometric's semantics:

    ``out_i = x_i W_root + b + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r``

    with ``c_{i,r} = 1 / |N_r(i)|`` (``aggr="mean"``: a mean per relation, ``|N_r(i)|`` the
    number of in-edges of ``i`` with relation ``r``, multi-edges counted) or ``c = 1``
    (``aggr="add"``). Relations are the graph's edge types (``edge_type`` of
    ``Graph.from_edge_index``); the graph must have exactly ``num_relations`` of them (an untyped
    graph counts as one relation). Parameters follow PyG: ``weight`` [R, in, out] (or [B, in, out]
    with ``comp`` [R, B] for ``num_bases=B``: ``W_r = sum_b comp[r, b] * weight[b]``; or
    [R, nb, in/nb, out/nb] for ``num_blocks=nb``: ``W_r`` block-diagonal), ``root`` [in, out],
    ``bias`` [out]; glorot weights, zero bias.

    The per-relation normalisation ``c`` is an edge tensor ``norm`` [E, 1] computed once per graph
    (cached by graph uid). Except on the ``per_basis`` path, the per-relation tables ``W``
    [R, in, out] are built densely in torch before the graph work (bases: one einsum; blocks: the
    blocks placed on the diagonal of a dense [R, in, out] table, simple and correct but it stores
    and multiplies the zeros). With ``P`` the distinct (source, relation) pairs and ``Q`` the
    distinct (destination, relation) *runs* (both ``<= E``; fewer when a vertex sends or receives
    several edges of one relation), the paths are:

    * ``per_run`` (aggregate, then transform; ``seastar.nn.rgcn_runs``): the message is linear in
      ``x_src``, so each run is summed first, ``H_(i,r) = sum_e c_e x_src(e)`` (the fused
      ``gcn_weighted_sum`` program over a *run graph*), then transformed by one dense GEMM per
      relation and added to its destination. Backward is the same on the reversed graph (runs of
      (source, relation) aggregate ``c_e * grad_out``; ``W_r^T`` for ``x``, ``x^T G`` for ``W``).
      Runs are processed in chunks of ``max(N, 4096)`` rows and nothing but ``x`` and ``W`` is
      saved for backward: ``(Q + 2P)*in*out + E*(in + out)`` multiply-adds per step, two
      ``[chunk, F]`` buffers. (When ``x`` needs no gradient the weight gradient re-aggregates
      the forward runs and the reversed plan is never built.)
    * ``per_basis`` (bases only; ``W_r = sum_b comp[r, b] weight[b]``): one typed vertex program
      aggregates per basis, ``g_i = sum_e c_e comp[type(e)] (x) x_src`` [B, in] (``comp[e.type]``
      [B, 1] broadcast against ``x`` [1, in]), then one GEMM ``g [N, B*in] @ weight [B*in, out]``;
      ``W_r`` is never formed. ``3*N*B*in*out + 3*E*B*in`` multiply-adds, ``N*B*in`` floats held
      for backward. Cheapest when ``B`` is small against the relations' share of the edges.
    * ``per_edge``: one typed vertex program, ``sum(e.src.x @ W[e.type] * e.norm for e in
      v.in_edges())``: a matrix-vector product per edge, ``E*in*out`` multiply-adds, no edge-sized
      tensor (fused backend), and gradients for ``W`` (``sum_rows_typed(outer(x, g), type)``).
    * ``per_pair`` (transform, then aggregate): each (source, relation) pair is transformed once,
      ``H_p = x_src(p) W_r(p)``, by one dense GEMM per relation on the gathered rows, then an
      untyped program sums ``norm[e] * H_p(e)`` over in-edges of the *pair graph* (edge ``e``
      runs from its pair to its destination, kept by the graph): ``P*in*out + E*out``
      multiply-adds forward and ``P*(in + out)`` extra floats, held for backward.

    ``per_edge`` and ``per_basis`` run on a copy of the graph whose edge ids follow the
    type-sorted CSC (``csc_ordered``, cached), so their destination-parallel kernels stream the
    edge types and ``norm`` instead of reading them through the edge-id map.

    ``mode="auto"`` (default) takes the cheapest path per training step (forward + backward, with
    or without a gradient for ``x``) by ``mode_costs``, in GEMM multiply-adds, with the cost model
    the relational layers share (``seastar.nn.relations``: ``MATVEC_COST`` per multiply-add of
    the per-edge programs, ``ROW_COST`` per float of a run or pair row moved by the scatter /
    gather between the GEMMs and the aggregation, and per float of a row an edge moves in the
    per-edge program's gradient for ``x``, both measured); ``per_pair`` must also be
    ``PAIR_MARGIN`` cheaper than the rest, as it alone holds O(P*F) floats between the passes;
    ties go to the path listed first in ``mode_costs``. An untyped graph always takes
    ``per_pair`` (its pairs are the vertices: one transform, one sum).

    Calls: ``conv(graph, x)`` with a typed graph; PyG's ``conv(x, edge_index, edge_type)`` and
    ``conv(x, adj_t)`` (the sparse values are the relations), the typed graph built once per
    ``(edge_index, edge_type)`` pair of tensors; ``conv((x_src, x_dst), ...)`` with
    ``in_channels=(in_src, in_dst)`` for a bipartite graph (``root`` reads ``x_dst``; the graph is
    the square one over ``max(num_src, num_dst)`` vertices, inputs zero-padded); featureless
    input, ``x=None`` (vertex ``i`` is ``arange(in_channels)[i]``) or an int64 index tensor: the
    message of ``j`` is the row ``W_r[x_j]`` and the root term ``root[x_i]``, looked up per
    (source, relation) pair (no one-hot matrix). ``aggr="sum"`` is ``"add"``; ``is_sorted`` is
    accepted and unused (edges are sorted once per graph). float16 / bfloat16 compute in float32.

    Memory (fused backend): no path builds an O(E*F) tensor; the reference backend materialises
    per-edge messages, O(E*in + E*out). ``per_edge`` with a trainable ``W`` runs fused only where
    the fused backend reduces parameter gradients (else on the reference backend with
    ``backend="auto"``). ``per_run`` and ``per_pair`` call fused programs only for untyped sums.
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, num_relations: int,
                 num_bases: Optional[int] = None, num_blocks: Optional[int] = None, aggr: str = "mean",
                 root_weight: bool = True, is_sorted: bool = False, bias: bool = True, mode: str = "auto",
                 backend: Optional[str] = None):
        super().__init__()
        if aggr == "sum":  # PyG's spelling of "add"
            aggr = "add"
        if aggr not in ("mean", "add"):
            raise ValueError(f"RGCNConv: aggr must be 'mean', 'add' or 'sum', got {aggr!r}")
        if mode not in RGCN_MODES:
            raise ValueError(f"RGCNConv: mode must be one of {RGCN_MODES}, got {mode!r}")
        if mode == "per_basis" and num_bases is None:
            raise ValueError("RGCNConv: mode='per_basis' needs num_bases")
        if num_relations < 1:
            raise ValueError(f"RGCNConv: num_relations must be >= 1, got {num_relations}")
        if num_bases is not None and num_blocks is not None:
            raise ValueError("RGCNConv: can not apply both basis-decomposition and block-diagonal-decomposition "
                             "regularization at the same time")
        in_l, in_r = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
        self.in_channels_l = in_l
        self.is_sorted = is_sorted  # accepted for PyG; the graph is sorted once per graph anyway
        self.in_channels, self.out_channels, self.num_relations = in_channels, out_channels, num_relations
        self.num_bases, self.num_blocks = num_bases, num_blocks
        self.aggr, self.mode, self.backend = aggr, mode, backend
        if num_bases is not None:
            if num_bases < 1:
                raise ValueError(f"RGCNConv: num_bases must be >= 1, got {num_bases}")
            self.weight = nn.Parameter(torch.empty(num_bases, in_l, out_channels))
            self.comp = nn.Parameter(torch.empty(num_relations, num_bases))
        elif num_blocks is not None:
            if num_blocks < 1 or in_l % num_blocks or out_channels % num_blocks:
                raise ValueError(f"RGCNConv: in_channels ({in_l}) and out_channels ({out_channels}) must be "
                                 f"divisible by num_blocks ({num_blocks})")
            self.weight = nn.Parameter(torch.empty(num_relations, num_blocks, in_l // num_blocks,
                                                   out_channels // num_blocks))
            self.register_parameter("comp", None)
        else:
            self.weight = nn.Parameter(torch.empty(num_relations, in_l, out_channels))
            self.register_parameter("comp", None)
        self.root = nn.Parameter(torch.empty(in_r, out_channels)) if root_weight else None
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.last_mode: Optional[str] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot(self.weight)
        glorot(self.comp)
        glorot(self.root)
        zeros(self.bias)

    def relation_weights(self) -> torch.Tensor:
        """The dense per-relation table ``W`` [R, in, out] (differentiable in the parameters)."""
        if self.num_bases is not None:
            return torch.einsum("rb,bio->rio", self.comp, self.weight)
        if self.num_blocks is not None:
            r, nb, bi, bo = self.weight.shape
            eye = torch.eye(nb, dtype=self.weight.dtype, device=self.weight.device)
            # full[r, b*bi + i, c*bo + o] = weight[r, b, i, o] * [b == c]
            return torch.einsum("rbio,bc->rbico", self.weight, eye).reshape(r, nb * bi, nb * bo)
        return self.weight

    def mode_costs(self, graph: Graph, x_grad: bool = True) -> Dict[str, int]:
        """The cost of one training step (forward + backward) of each path on this graph, in
        multiply-adds of a dense GEMM; ``x_grad``: whether ``x`` needs a gradient. The cost rule
        of ``mode="auto"`` (see the class docstring)."""
        fin, fout, ff = self.in_channels_l, self.out_channels, self.in_channels_l * self.out_channels
        e, n = graph.num_edges, graph.num_nodes
        p = relation_pairs(graph, self.num_relations).num_pairs
        q = self._num_runs(graph)
        rows = fin + fout
        # per_run: forward runs Q; backward either the reversed runs P (for x, and W from them)
        # or the forward runs again (W only); each run row is also scattered / gathered
        run_rows = q + (2 * p if x_grad else q)
        costs = {
            "per_edge": per_edge_cost(e, ff, x_grad, rows),
            "per_run": run_rows * ff + ROW_COST * run_rows * rows,
            "per_pair": per_pair_cost(p, ff, rows, x_grad),
        }
        if self.num_bases is not None:
            b = self.num_bases
            costs["per_basis"] = 3 * n * b * ff + (3 if x_grad else 2) * e * b * fin
        return costs

    def choose_mode(self, graph: Graph, x_grad: bool = True) -> str:
        """The path for this graph: the ``mode`` argument, or the cheapest by ``mode_costs`` (ties
        go to the path listed first there, the leaner in memory). An untyped graph always takes
        ``per_pair``: its pairs are its vertices, so that is one dense transform and one sum."""
        if not graph.has_edge_types:
            return "per_pair"
        if self.mode != "auto":
            return self.mode
        if torch.compiler.is_compiling():
            # compiled code serves graphs of every size, so it cannot choose by their sizes: the
            # basis program with bases, else the runs, whose cost (mode_costs) is at most the
            # pairs' wherever the (destination, relation) runs are no more than the (source,
            # relation) pairs (a sampled block's few destinations), about equal elsewhere, and
            # which save nothing but x and W for backward (ops: seastar.nn.rgcn_runs_op)
            return "per_basis" if self.num_bases is not None else "per_run"
        return cheapest(self.mode_costs(graph, x_grad))

    def _num_runs(self, graph: Graph) -> int:
        return derived(graph, _num_runs, self.num_relations)

    @float32_inside
    def forward(self, x, edge_index=None, edge_type: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward(graph, x)`` (relations = the graph's edge types) or PyG's ``forward(x,
        edge_index, edge_type)`` / ``forward(x, adj_t)`` (the sparse values are the edge types).
        ``x``: [N, in] features, a pair ``(x_src, x_dst)`` for a bipartite graph, or featureless:
        None (vertex ``i`` is ``arange(in_channels)[i]``) or an int64 index tensor, selecting rows
        of the weights (``x_j W_r`` becomes ``W_r[x_j]``, the root term ``root[x_i]``)."""
        call = typed_call("RGCNConv", x, edge_index, edge_type, self.num_relations, self.in_channels_l,
                          self.weight.device, self.weight.dtype)
        graph, x_l, x_r = call.graph, call.x_src, call.x_dst
        if x_l.is_floating_point():
            x_l = dense(x_l)
            if x_l.dim() != 2 or x_l.shape[1] != self.in_channels_l:
                raise ValueError(f"RGCNConv: x must be [N, {self.in_channels_l}], got {tuple(x_l.shape)}")
            out = self._messages(graph, pad_rows(x_l, graph.num_nodes))
        else:
            if self.num_blocks is not None:
                raise ValueError("Block-diagonal decomposition not supported for non-continuous input features.")
            out = self._featureless_messages(graph, pad_rows(x_l.long(), graph.num_nodes), call.dtype)
        out = out[:call.num_dst]
        if self.root is not None:
            out = out + (x_r @ self.root if x_r.is_floating_point() else self.root[x_r.long()])
        if self.bias is not None:
            out = bias_add(out, self.bias) if torch.compiler.is_compiling() else out + self.bias
        return out

    def _messages(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        """``sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` for every vertex of ``graph``, by the
        cheapest path (``choose_mode``)."""
        edge_types(graph, self.num_relations, "RGCNConv")  # validates the graph's types
        mode = self.choose_mode(graph, x.requires_grad)
        self.last_mode = mode  # the path the last call took (reported by the examples and benchmarks)
        if mode in ("per_edge", "per_basis"):  # destination-parallel typed programs: stream edge data
            graph = csc_ordered(graph, self.num_relations)
        if mode == "per_run":  # its run plans are kept by the graph, with the norms they need
            W = self.relation_weights()
            if torch.compiler.is_compiling():
                return per_run_op(graph, x, W, self.aggr == "mean", self.backend)
            fwd, dfwd, reversed_plans = graph_run_plans(graph, self.num_relations, self.aggr == "mean", x.device, x.dtype)
            return per_run_conv(x, W, fwd, dfwd, reversed_plans, backend=self.backend)
        norm = None
        if self.aggr == "mean":
            norm = relation_norm(graph, self.num_relations, x.device, x.dtype)
        if mode == "per_basis":
            return self._basis_forward(graph, x, norm)
        return self._relation_forward(graph, x, norm, mode)

    def _featureless_messages(self, graph: Graph, idx: torch.Tensor, dtype) -> torch.Tensor:
        """Featureless input (one-hot rows): each (source, relation) pair's message is the row
        ``W_r[idx_src]`` of the relation's table, looked up, then aggregated over the pair graph."""
        edge_types(graph, self.num_relations, "RGCNConv")
        self.last_mode = "per_pair"
        if graph.num_edges == 0:
            return torch.zeros(graph.num_nodes, self.out_channels, dtype=dtype, device=idx.device)
        W = self.relation_weights().to(dtype)
        pairs = relation_pairs(graph, self.num_relations)
        h = relation_rows(W, pairs, idx)
        if self.aggr == "mean":
            norm = relation_norm(graph, self.num_relations, h.device, h.dtype)
            out = weighted_sum(pairs.graph, backend=self.backend, h=h, w=norm)
        else:
            out = neighbour_sum(pairs.graph, backend=self.backend, h=h)
        return out[:graph.num_nodes]

    def _relation_forward(self, graph: Graph, x: torch.Tensor, norm: Optional[torch.Tensor], mode: str):
        """``sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` by the dense per-relation table ``W``."""
        W = self.relation_weights()
        if not torch.is_grad_enabled():  # inference: no parameter gradients, so the typed program runs fused
            W = W.detach()
        if mode == "per_edge":
            if norm is None:
                return rgcn_typed_sum(graph, backend=self.backend, x=x, W=W)
            return rgcn_typed_weighted(graph, backend=self.backend, x=x, W=W, norm=norm)
        pairs = relation_pairs(graph, self.num_relations)
        h = relation_matmul(x, pairs, W)
        if norm is None:
            out = neighbour_sum(pairs.graph, backend=self.backend, h=h)
        else:
            out = weighted_sum(pairs.graph, backend=self.backend, h=h, w=norm)
        return out[:graph.num_nodes]

    def _basis_forward(self, graph: Graph, x: torch.Tensor, norm: Optional[torch.Tensor]):
        """``sum_b (sum_e c_e comp[r_e, b] x_src) @ weight[b]``: one aggregation into ``[N, B, in]``
        and one GEMM, never the per-relation table."""
        n, b = graph.num_nodes, self.num_bases
        comp = self.comp.unsqueeze(-1)  # [R, B, 1]: comp[e.type] broadcasts over x's features
        xs = x.unsqueeze(1)  # [N, 1, in]
        if norm is None:
            g = rgcn_basis_sum(graph, backend=self.backend, x=xs, comp=comp)
        else:
            g = rgcn_basis_weighted(graph, backend=self.backend, x=xs, comp=comp, norm=norm)
        fin = self.in_channels_l
        return g.reshape(n, b * fin) @ self.weight.reshape(b * fin, self.out_channels)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations})")
