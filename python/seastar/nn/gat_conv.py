"""GATConv: graph attention (Velickovic et al., ICLR 2018) as one vertex program."""
from __future__ import annotations

import contextlib
import itertools

import logging
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from .. import ops as ss
from .._dynamo_marks import assume_constant_result
from ..graph import Graph
from ..graph_inputs import static_int
from ..program import VertexProgram, program_factory, vertex_program
from ._layer import HomogeneousLayer, LayerCall
from ._linear import Linear
from ._loops import loop_ids, loop_values, with_loops
from ._precision import float32_inside
from ._programs import weighted_sum
from ._recompute import recomputed_projection
from ._utils import add_bias, dropout_mask, glorot, zeros
from .relations import TYPICAL_FANOUT
from .softmax import edge_softmax

log = logging.getLogger("seastar")

# Aggregating first (GATConv._aggregates_first): an edge's multiply-add in the attention program
# counted against a GEMM's, and how much cheaper the estimate must be to switch
EDGE_COST = 4
AGGREGATE_FIRST_MARGIN = 0.7


@program_factory
def gat_program(negative_slope: float, attention_dropout: bool, has_dst: bool = True,
                has_edge: bool = False) -> VertexProgram:
    """The GAT aggregation for one slope. Scores are ``el[src] (+ er[dst]) (+ ea[e])``; with
    ``attention_dropout`` the attention is multiplied by a per-edge mask ``e.m``.

    Programs are traced per signature of the bound tensors; the slope is a constant baked into
    the trace, so each slope (and variant) gets its own program, shared by all layers using it."""
    def score(v, e):
        s = e.src.el
        if has_dst:
            s = s + v.er
        if has_edge:
            s = s + e.ea
        return ss.leaky_relu(s, negative_slope)

    name = "gat" + ("" if has_dst else "_nodst") + ("_edge" if has_edge else "")
    name += "_dropout" if attention_dropout else ""
    if attention_dropout:
        @vertex_program(name=name)
        def gat(v):
            alpha = ss.softmax([score(v, e) for e in v.in_edges()])
            return ss.sum(a * e.m * e.src.h for a, e in zip(alpha, v.in_edges()))
    else:
        @vertex_program(name=name)
        def gat(v):
            alpha = ss.softmax([score(v, e) for e in v.in_edges()])
            return ss.sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))
    return gat


def _aggregate_is_cheaper(ns, nd, E, F_in: int, H: int, C: int) -> bool:
    project = ns * F_in * H * C + EDGE_COST * E * H * C
    aggregate = (ns + nd) * F_in * H + EDGE_COST * E * H * F_in + nd * F_in * H * C
    return aggregate < AGGREGATE_FIRST_MARGIN * project


@assume_constant_result
def _aggregates_first_typical(bipartite: bool, F_in: int, H: int, C: int, loops: bool) -> bool:
    """The cost model on a graph of typical sizes for its kind: a sampled block of ``TYPICAL_FANOUT``
    in-edges per destination, each from its own source, or a square graph of that mean degree."""
    nd = 1000
    E = TYPICAL_FANOUT * nd
    ns = nd + E if bipartite else nd
    return _aggregate_is_cheaper(ns, nd, E + (nd if loops else 0), F_in, H, C)


def attention_result(s, alpha: torch.Tensor, device):
    """PyG's ``(edge_index, alpha)`` of ``return_attention_weights``: ``alpha`` [E, H] on ``s``'s
    edges, or a sparse [num_dst, num_src, H] tensor when the structure came as a sparse adjacency."""
    ei = s.edge_index.to(device)
    if s.layout is None or s.layout == "torch_sparse":
        return ei, alpha
    # a sparse adjacency in: a sparse [num_dst, num_src, H] attention out, in its own (row-major) order
    order = torch.argsort(ei[1] * max(s.num_src, 1) + ei[0], stable=True)
    ei, alpha = ei[:, order], alpha[order]
    size = (s.num_dst, s.num_src) + tuple(alpha.shape[1:])
    if s.layout == torch.sparse_csr:
        counts = torch.bincount(ei[1], minlength=s.num_dst)
        crow = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
        return torch.sparse_csr_tensor(crow, ei[0], alpha, size), alpha
    return torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), alpha, size, is_coalesced=True), alpha


class GATConv(HomogeneousLayer):
    r"""Graph attention: per head ``k``, ``h = x W`` split into heads ``[N, H, C]``,

    ``s_e = leaky_relu(<h_j, a_src> + <h_i, a_dst> [+ <W_e x_e, a_edge>])`` for an edge
    ``e = (j -> i)``, ``alpha_e = softmax_{e into i}(s_e)`` (max-subtracted),
    ``out_i = sum_e alpha_e * h_j``, then heads concatenated ``[N, H*C]`` (``concat=True``) or
    averaged ``[N, C]``, plus ``x_i W_res`` (``residual=True``) and the bias.

    ``x W`` (``x`` may be a sparse COO tensor) and the per-vertex halves of the score,
    ``el = <h, a_src>`` and ``er = <h, a_dst>`` (``[N, H, 1]``), are dense torch; leaky_relu,
    the softmax and the weighted sum are one vertex program, so the fused backend computes it
    in a single traversal (online softmax) without edge-sized tensors. As in PyG, existing self
    loops are removed and one loop per vertex is added (``add_self_loops=True``; on a bipartite
    graph ``min(num_src, num_dst)`` loops; the loop graph is kept by the graph).

    Edge features (``edge_dim``): ``edge_attr`` [E, edge_dim] adds ``<W_e x_e, a_edge>`` per head
    to the score, computed as one [E, edge_dim] x [edge_dim, H] product; the added self loops'
    features are ``fill_value`` (a number, a tensor, or a reduction of the vertex's other
    in-edges' features: ``"mean"`` (default), ``"add"``, ``"max"``, ...). As in PyG,
    ``edge_attr`` is ignored when the layer has no ``edge_dim`` (a warning is logged once).

    On a graph with many more sources than destinations (a sampled block) the layer aggregates
    first: ``el``, ``er`` as ``x . (W_h^T a_h)``, the program sums ``alpha_e * x_j`` per head
    (``[N_dst, H, F_in]``), and each head's projection follows, so ``x W`` is never formed for
    the sources; a cost model picks the order (``_aggregates_first``; ``conv.aggregate_first =
    True / False`` fixes it), and the value is the same either way.

    Bipartite graphs: ``in_channels=(F_src, F_dst)`` gives separate source and destination
    projections (``lin_src``, ``lin_dst``); ``x=(x_src, x_dst)``; ``x_dst=None`` scores with the
    source half only (pass ``size``).

    Attention dropout: vertex programs contain no randomness, so dropout on ``alpha`` is a
    per-edge mask ``m`` ``[E, H, 1]`` (Bernoulli(1-p)/(1-p)) drawn in torch and bound as an edge
    feature: the program returns ``sum_e alpha_e * m_e * h_j``, which is exactly PyG's
    ``dropout(alpha)`` followed by the weighted sum. In eval mode (or with ``dropout=0``) the mask
    is all ones, so the program without the mask is used instead (same result, no E-sized input).
    ``return_attention_weights=True`` returns ``(out, (edge_index, alpha))`` as PyG (a sparse
    ``alpha`` for a sparse adjacency); ``alpha`` [E, H] is then computed explicitly (an
    edge-sized softmax) and the output aggregates it.

    Calls: ``conv(graph, x)``, PyG's ``conv(x, edge_index, edge_attr=None, size=None,
    return_attention_weights=None)``, ``conv(x, adj_t)``, ``conv((x_src, x_dst), edge_index)``,
    ``conv(data)``. ``in_channels=-1`` (or ``(-1, -1)``) is lazy; float16 / bfloat16 compute in
    float32. Parameters (PyG's names): ``lin.weight`` (or ``lin_src``, ``lin_dst``), ``att_src``,
    ``att_dst``, ``lin_edge.weight``, ``att_edge``, ``res.weight``, ``bias``; glorot, bias zeros.

    Memory per forward + backward (floats; N vertices, E edges incl. self loops, H heads, C
    channels per head, F_in input): fused backend ``N*F_in`` (x) + ``N*H*C`` (h) + ``2*N*H``
    (el, er) + ``N*H*C`` (output) + O(N*H) softmax statistics (max, sum) + the same again for
    gradients, plus ``E*H`` for the attention-dropout mask when training with ``dropout > 0`` (and
    for edge scores with ``edge_dim``): O(N*H*(C + F_in/H) + E*H), no O(E*H*C) tensor. ``h`` is
    not kept from forward to backward: backward computes ``x W`` again (one product per backward
    pass; ``conv.recompute_projection = False`` keeps it instead). The reference backend
    materialises the scores, the attention and the messages, O(E*H*C).
    """

    def __init__(self, in_channels: Union[int, tuple], out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: Optional[int] = None, fill_value: Union[float, torch.Tensor, str] = "mean",
                 bias: bool = True, residual: bool = False, backend: Optional[str] = None):
        super().__init__(backend)
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"GATConv: dropout must be in [0, 1], got {dropout}")
        if heads < 1 or out_channels < 1:
            raise ValueError(f"GATConv: heads and out_channels must be >= 1, got {heads} and {out_channels}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, float(negative_slope), float(dropout)
        self.add_self_loops, self.edge_dim, self.fill_value = add_self_loops, edge_dim, fill_value
        self.residual = residual
        HC = heads * out_channels
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = Linear(in_channels, HC, bias=False, weight_initializer="glorot")
        else:
            self.lin_src = Linear(in_channels[0], HC, bias=False, weight_initializer="glorot")
            self.lin_dst = Linear(in_channels[1], HC, bias=False, weight_initializer="glorot")
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, HC, bias=False, weight_initializer="glorot")
            self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        total_out = HC if concat else out_channels
        if residual:
            self.res = Linear(in_channels if isinstance(in_channels, int) else in_channels[1], total_out,
                              bias=False, weight_initializer="glorot")
        else:
            self.register_parameter("res", None)
        if bias:
            self.bias = nn.Parameter(torch.empty(total_out))
        else:
            self.register_parameter("bias", None)
        self._warned_edge_attr = False
        self.aggregate_first: Optional[bool] = None  # None: by cost (see _aggregates_first)
        # backward computes x W again rather than keeping it from forward (see _recompute.py)
        self.recompute_projection = True
        for variant in itertools.product((False, True), repeat=3):  # built here: torch.compile cannot build them
            gat_program(self.negative_slope, *variant)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # PyG's order, so that a seeded initialisation draws the same numbers
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        glorot(self.att_src)
        glorot(self.att_dst)
        glorot(self.att_edge)
        zeros(self.bias)

    @float32_inside
    def forward(self, x, edge_index=None, edge_attr: Optional[torch.Tensor] = None, size=None,
                return_attention_weights: Optional[bool] = None):
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, edge_attr=None, size=None,
        return_attention_weights=None)``."""
        call = self.read_call(x, edge_index, size, batches=False, edge_attr=edge_attr)
        x_src, x_dst = call.x_src, call.x_dst
        if x_src is None or x_src.dim() != 2:
            raise ValueError("GATConv: x (or x_src) must be a [N, F] tensor; static graphs ([B, N, F]) are not "
                             "supported in 'GATConv' (as in PyG)")
        res = None if self.res is None or x_dst is None else self.res(x_dst)
        if return_attention_weights:
            out, s, alpha = self._forward_returning_attention(call)
            return self._output(out, res), attention_result(s, alpha[..., 0], x_src.device)
        if self._aggregates_first(call.edge_index, x_src, x_dst):
            return self._output(self._forward_aggregating_first(call), res)
        return self._output(self._forward_projecting_first(call), res)

    def _forward_projecting_first(self, call: LayerCall) -> torch.Tensor:
        """``sum_e alpha_e (x_j W)`` per head: the sources projected, scored and aggregated, with
        ``x W`` computed again in backward rather than kept (``recompute_projection``)."""
        h_flat, h_src, h_dst = self._project(call)
        recompute = (recomputed_projection(self._linears()[0], call.x_src, h_flat) if self.recompute_projection
                     else contextlib.nullcontext())
        with recompute:
            el, er = self._scores(h_src, h_dst)
        s, ea = self._structure(call)
        mask = self._attention_dropout(s, el)
        with recompute:
            return self._aggregate(s, h_src, el, er, ea, mask)

    def _forward_aggregating_first(self, call: LayerCall) -> torch.Tensor:
        """``(sum_e alpha_e x_j) W_h`` per head: the input rows aggregated per head
        [N_dst, H, F_in], then each head's projection; the score halves come from ``x`` as
        ``<x W_h, att_h> = <x, W_h^T att_h>``, so ``x W`` is never formed for the sources."""
        x_src, x_dst = call.x_src, call.x_dst
        if not call.pair and isinstance(call.edge_index, Graph) and call.edge_index.is_bipartite:
            x_dst = x_src[:call.edge_index.num_dst]  # a block's destinations are its first sources
            call = call._replace(x_dst=x_dst)
        lin_s, lin_d = self._linears()
        el = self._score_half(x_src, lin_s, self.att_src)
        er = None if x_dst is None else self._score_half(x_dst, lin_d, self.att_dst)
        s, ea = self._structure(call)
        agg = self._aggregate(s, x_src.unsqueeze(1), el, er, ea, self._attention_dropout(s, el))
        H, C = self.heads, self.out_channels
        return torch.einsum("nhf,hcf->nhc", agg, lin_s.weight.view(H, C, -1))

    def _forward_returning_attention(self, call: LayerCall):
        """``(out, s, alpha)`` with the attention ``alpha`` [E, H, 1] computed explicitly (an
        edge-sized softmax, which the caller asked for) and the output aggregating it."""
        _, h_src, h_dst = self._project(call)
        el, er = self._scores(h_src, h_dst)
        s, ea = self._structure(call)
        mask = self._attention_dropout(s, el)
        alpha = self._attention(s, el, er, ea)
        weights = alpha if mask is None else alpha * mask
        out = s.out(weighted_sum(s.graph, backend=self.backend, h=s.src(h_src), w=weights))
        return out, s, alpha

    def _linears(self):
        """The sources' and the destinations' projections (one shared, or PyG's bipartite pair)."""
        return (self.lin, self.lin) if self.lin is not None else (self.lin_src, self.lin_dst)

    def _project(self, call: LayerCall):
        """``(x_src W, x_src W as [N, H, C], x_dst W as [N, H, C] or None)``; one product when
        the destinations are the sources and share their projection."""
        H, C = self.heads, self.out_channels
        lin_s, lin_d = self._linears()
        h_flat = lin_s(call.x_src)
        h_src = h_flat.view(-1, H, C)
        h_dst = None
        if call.x_dst is not None:
            h_dst = h_src if not call.pair and self.lin is not None else lin_d(call.x_dst).view(-1, H, C)
        return h_flat, h_src, h_dst

    def _scores(self, h_src: torch.Tensor, h_dst: Optional[torch.Tensor]):
        """The per-vertex halves of the score, ``el = <h_src, a_src>`` and ``er = <h_dst, a_dst>``."""
        if h_dst is h_src:  # both halves from one product: one [N, H*C] gradient, not two
            el, er = self._score(h_src, torch.cat([self.att_src, self.att_dst])).split(self.heads, dim=1)
            return el, er
        return self._score(h_src, self.att_src), None if h_dst is None else self._score(h_dst, self.att_dst)

    def _structure(self, call: LayerCall):
        """``(s, ea)``: the call's structure, with PyG's self loops when the layer adds them, and
        the edge scores of its edge features (None without)."""
        s = call.structure()
        edge_attr = call.extra["edge_attr"]
        if self.add_self_loops:
            if s.layout is not None and (edge_attr is not None or (s.layout == "torch_sparse" and self.edge_dim)):
                raise NotImplementedError("The usage of 'edge_attr' and 'add_self_loops' simultaneously is currently "
                                          "not yet supported for 'edge_index' in a sparse form")
            lg = with_loops(s)
            if edge_attr is not None:
                ids = loop_ids(s, lg)
                edge_attr = loop_values(lg, ids, self._edge_attr_2d(edge_attr, s.num_edges), self.fill_value, "replace")
            s = lg.structure
        return s, self._edge_scores(edge_attr, s.num_edges)

    def _attention_dropout(self, s, el: torch.Tensor) -> Optional[torch.Tensor]:
        """The per-edge dropout mask [E, H, 1] in training with ``dropout > 0``; None otherwise."""
        if self.training and self.dropout > 0.0:
            return dropout_mask((s.num_edges, self.heads, 1), self.dropout, el)
        return None

    def _output(self, out: torch.Tensor, res: Optional[torch.Tensor]) -> torch.Tensor:
        """The heads [N, H, C] concatenated or averaged, plus the residual and the bias."""
        H, C = self.heads, self.out_channels
        if self.concat and res is None and self.bias is not None and out._base is None:
            out = add_bias(out, self.bias.view(H, C))  # before the reshape, which makes a view
            return out.reshape(-1, H * C)
        out = out.reshape(-1, H * C) if self.concat else out.mean(dim=1)
        if res is not None:
            out = out + res
        # `out` is the program's output, the heads' product, their mean or a sum: no backward reads it
        return add_bias(out, self.bias)

    def _aggregates_first(self, edge_index, x_src: torch.Tensor, x_dst) -> bool:
        """Whether to aggregate the input rows per head and project after, ``out_h = (sum_e
        alpha_e x_j) W_h``, rather than project every source, ``sum_e alpha_e (x_j W_h)``: the same
        value (the projection is linear), cheaper when a graph has many more sources than
        destinations, as a sampled block has. ``self.aggregate_first`` (True / False) overrides
        the cost model (multiply-adds, an edge's counted ``EDGE_COST`` times a GEMM's)."""
        if x_src.is_sparse or x_src.dim() != 2:  # the program reads dense rows
            return False
        if self.aggregate_first is not None:
            return bool(self.aggregate_first)
        if not isinstance(edge_index, Graph):
            return False
        H, C = self.heads, self.out_channels
        if torch.compiler.is_compiling():
            # compiled code serves graphs of every size, so the choice cannot depend on theirs
            # (it would be a guard, and a recompile wherever it flips): the kind's typical sizes
            return _aggregates_first_typical(edge_index.is_bipartite, static_int(x_src.shape[1]), H, C,
                                             self.add_self_loops)
        ns, nd = edge_index.num_src, edge_index.num_dst
        E = edge_index.num_edges + (min(ns, nd) if self.add_self_loops else 0)
        return _aggregate_is_cheaper(ns, nd, E, x_src.shape[1], H, C)

    def _score(self, h: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """``<h_k, att_k>`` per head for each of the K vectors ``att`` [K, H, C] stacks, as
        [N, K*H, 1]: one product with the block-diagonal [H*C, K*H] matrix of ``att``, where
        ``(h * att).sum(-1)`` would write an [N, H, C] temporary forward and two more backward,
        each as large as ``h``."""
        H, C = self.heads, self.out_channels
        K = att.shape[0]
        eye = torch.eye(H, dtype=att.dtype, device=att.device)
        blocks = att.view(K, H, C, 1) * eye.view(1, H, 1, H)  # [K, H, C, H]: att[k, h] on block (h, h)
        return (h.reshape(-1, H * C) @ blocks.permute(1, 2, 0, 3).reshape(H * C, K * H).to(h.dtype)).unsqueeze(-1)

    def _score_half(self, x: torch.Tensor, lin: Linear, att: torch.Tensor) -> torch.Tensor:
        """``<x W_h, att_h>`` per head as ``x . (W_h^T att_h)``: [N, H, 1] without [N, H*C]."""
        lin.materialize(x.shape[-1])
        H, C = self.heads, self.out_channels
        a = (lin.weight.view(H, C, -1) * att.view(H, C, 1)).sum(1)  # [H, F_in]
        return (x @ a.t()).unsqueeze(-1)

    def _edge_attr_2d(self, edge_attr: torch.Tensor, num_edges: int) -> torch.Tensor:
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.view(-1, 1)
        if edge_attr.shape[0] != num_edges:
            raise ValueError(f"GATConv: edge_attr has {edge_attr.shape[0]} rows but the graph has {num_edges} edges")
        return edge_attr

    def _edge_scores(self, edge_attr: Optional[torch.Tensor], num_edges: int) -> Optional[torch.Tensor]:
        """``<lin_edge(edge_attr)_k, att_edge_k>`` per head, [E, H, 1], without the [E, H*C] product."""
        if edge_attr is None:
            return None
        if self.lin_edge is None:
            if not self._warned_edge_attr:
                log.warning("GATConv: edge_attr is ignored: the layer has no edge_dim (as in PyG)")
                self._warned_edge_attr = True
            return None
        edge_attr = self._edge_attr_2d(edge_attr, num_edges)
        self.lin_edge.materialize(edge_attr.shape[-1])
        H, C = self.heads, self.out_channels
        w = self.lin_edge.weight.view(H, C, -1)
        w_att = (w * self.att_edge.view(H, C, 1)).sum(1)  # [H, edge_dim]
        return (edge_attr.to(w_att.dtype) @ w_att.t()).unsqueeze(-1)

    def _aggregate(self, s, h_src, el, er, ea, mask):
        prog = gat_program(self.negative_slope, mask is not None, er is not None, ea is not None)
        tensors = dict(h=s.src(h_src), el=s.src(el))
        if er is not None:
            tensors["er"] = s.dst(er)
        if ea is not None:
            tensors["ea"] = ea
        if mask is not None:
            tensors["m"] = mask
        return s.out(prog(s.graph, backend=self.backend, **tensors))

    def _attention(self, s, el, er, ea) -> torch.Tensor:
        """alpha [E, H, 1], explicitly (for return_attention_weights)."""
        src, dst = s.edge_index.to(el.device)
        score = el[src]
        if er is not None:
            score = score + er[dst]
        if ea is not None:
            score = score + ea
        return edge_softmax(s.graph, F.leaky_relu(score, self.negative_slope), backend=self.backend)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
