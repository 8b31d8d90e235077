"""GCNConv: the graph convolution of Kipf & Welling (ICLR 2017) as a vertex program."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ._gcn_norm import VertexNorm, block_norm, cached_normalisation, gcn_norm
from ._inputs import edge_weights, resolve
from ._layer import HomogeneousLayer, LayerCall
from ._linear import Linear
from ._precision import float32_inside
# the sums stay importable from here: code outside seastar.nn (distributed training, benchmarks,
# examples) imports them from the layer that first defined them
from ._programs import neighbour_sum, propagate, symmetric_sum, weighted_sum  # noqa: F401
from ._structure import FLOWS
from ._utils import add_bias, zeros


def propagate_first(x: torch.Tensor, weight: torch.Tensor, w) -> bool:
    """Whether ``A (x W)`` is cheaper as ``(A x) W`` (the same function): in propagations of
    rows, counting the backward's, which ``(A x) W`` needs only when ``x`` itself needs a
    gradient (a first layer's input does not; ``x W`` always needs one in training). With
    learned edge weights the two orders differ in which product their gradient reads, so the
    order stays as given then; a sparse ``x`` is transformed first (it cannot be propagated)."""
    if x.is_sparse or isinstance(weight, nn.parameter.UninitializedParameter):
        return False
    if isinstance(w, torch.Tensor) and w.requires_grad:
        return False
    if isinstance(w, VertexNorm) and w.w is not None and (w.w.requires_grad or w.dinv.requires_grad):
        return False
    f_in, f_out = x.shape[-1], weight.shape[0]
    training = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    cost_first = f_in * (1 + (training and x.requires_grad))
    cost_after = f_out * (1 + training)
    return cost_first < cost_after


class GCNConv(HomogeneousLayer):
    r"""Graph convolution: ``out = D^-1/2 (A + I) D^-1/2 (x W) + b``.

    Per vertex ``i``: ``out_i = b + sum_{e = (j -> i)} w_e * (x_j W)`` with
    ``w_e = a_e / sqrt(d_j * d_i)``, ``a_e`` the edge's weight (1 without ``edge_weight``) and
    ``d`` the weighted in-degree in ``A + I``. Self loops follow PyG's
    ``add_remaining_self_loops``: a vertex that already has a loop keeps it (and its weight),
    the others get one of weight 1 (2 with ``improved=True``, applied where there are edge
    weights, as in PyG); see ``seastar.nn._gcn_norm`` for the sparse-adjacency rules. Without
    edge weights the propagated graph and its weights are computed once per graph and cached on
    the layer (keyed by the graph's uid); ``cached=True`` goes further, as in PyG: the first
    call's normalised graph is reused for every later call, whatever graph is passed, until
    ``reset_parameters()``; with constant edge weights it is kept with its edges in destination
    order and the weights with them, so the propagation reads them as a stream
    (``_gcn_norm.in_destination_order``). ``normalize=False``: a plain (weighted) sum over
    in-edges, no self
    loops (``add_self_loops`` defaults to ``normalize``; asking for loops without normalisation
    is an error, as in PyG). ``flow="target_to_source"`` propagates along reversed edges.

    On a sampled block (a bipartite ``seastar.Graph`` whose destination ``i`` is its source
    ``i``, as ``NeighborLoader`` yields; ``x`` has the sources' ``num_src`` rows) the
    normalisation is DGL's ``GraphConv(norm="both")`` over the block:
    ``out = D_dst^-1/2 A D_src^-1/2 (x W) + b``, ``D_src`` the sources' out-degrees and ``D_dst``
    the destinations' in-degrees *in the block*, each clamped to at least 1 (a destination
    without in-edges gets ``b``). ``add_self_loops`` (the default) first adds PyG's remaining
    self loops, source ``v`` -> destination ``v`` for every destination ``v`` (a destination's
    loop edges give way to one), counted in both degrees; ``add_self_loops=False`` is DGL's
    ``GraphConv`` exactly (DGL's blocks hold a loop only where the sampled graph had one). With
    every neighbour sampled the destinations' degrees are the whole graph's, the sources'
    count only their edges into the batch, so a block's output is not the whole graph's GCN at
    the seeds; ``NeighborLoader(subgraph=True)`` gives that with one more hop than layers.
    On a block ``edge_weight`` needs ``normalize=False`` (pre-normalised weights), ``cached=True``
    is refused (blocks change every batch), and a pair ``(x_src, x_dst)`` is accepted with
    ``x_dst`` unread (as DGL). PyG's bipartite call ``conv((x_src, x_dst), edge_index)`` stays
    refused, as in PyG.

    Calls: ``conv(graph, x)`` / ``conv(graph, x, edge_weight)``; PyG's ``conv(x, edge_index)``,
    ``conv(x, edge_index, edge_weight)``, ``conv(x, adj_t)`` (sparse, values = weights) and
    ``conv(data)``. ``x`` [N, F] or, for one graph shared by a batch, [B, N, F]. ``in_channels=-1``
    defers the weight's width to the first call. float16 / bfloat16 compute in float32.

    ``x W`` is dense torch (``x`` may be a sparse COO tensor), before or after the propagation
    (``A (x W) = (A x) W``), whichever propagates fewer rows forward and backward
    (``propagate_first``: a first layer's input needs no gradient, so propagating it first
    leaves the backward no propagation at all); the propagation is one vertex
    program: ``sum(e.src.d * e.src.h * e.dst.d)`` with ``d = deg^-1/2`` per vertex (the self
    loops added as a per-vertex term, not as edges: no second graph), times ``e.w`` with edge
    weights (read as given; ``d`` from the weighted in-degree), ``sum(e.src.h * e.w)`` without
    normalisation. Weights glorot, bias zeros (as PyG); parameter names ``lin.weight``, ``bias``.

    Memory per forward + backward (floats; N vertices, E edges, F_in -> F_out): fused backend
    ``N*F_in`` (x, kept by the linear map for its gradient) + ``N*F_out`` (the output) + the same
    for gradients, plus ``N`` degree and ``N`` loop factors (and the ``E`` edge weights as given);
    the propagation's backward reads neither ``x W`` nor the output, so autograd keeps neither:
    O(N*(F_in + F_out) + E), no O(E*F) tensor. The reference backend additionally materialises
    the messages, O(E*F_out).
    """

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False, cached: bool = False,
                 add_self_loops: Optional[bool] = None, normalize: bool = True, bias: bool = True,
                 flow: str = "source_to_target", backend: Optional[str] = None):
        super().__init__(backend)
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError(f"'{self.__class__.__name__}' does not support adding self-loops to the graph when no "
                             f"on-the-fly normalization is applied")
        if flow not in FLOWS:
            raise ValueError(f"GCNConv: flow must be one of {FLOWS}, got {flow!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = bool(improved), bool(cached)
        self.add_self_loops, self.normalize, self.flow = bool(add_self_loops), bool(normalize), flow
        self.lin = Linear(in_channels, out_channels, bias=False, weight_initializer="glorot")
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self._cached_edge_index = None  # PyG's names: the normalised graph kept by cached=True
        self._cached_adj_t = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        zeros(self.bias)
        self._cached_edge_index = None
        self._cached_adj_t = None

    @float32_inside
    def forward(self, x, edge_index=None, edge_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward(graph, x, edge_weight=None)`` or PyG's ``forward(x, edge_index, edge_weight=None)``."""
        call = self.read_call(x, edge_index, pairs=False, edge_weight=edge_weight)
        if call.on_block:
            return self._forward_block(call)
        x, edge_index, edge_weight = call.x_src, call.edge_index, call.extra["edge_weight"]
        if self.normalize:
            s, w = self._normalised(x, edge_index, edge_weight, x)
        else:
            s = call.structure(self.flow)
            w = edge_weights(s, edge_weight, "GCNConv")
        if propagate_first(x, self.lin.weight, w):
            out = self.lin(propagate(s, x, w, self.backend))
        else:
            out = propagate(s, self.lin(x), w, self.backend)
        # `out` is the product's or the propagation's, and neither backward reads it
        return add_bias(call.output(out), self.bias)

    def _forward_block(self, call: LayerCall) -> torch.Tensor:
        """A sampled block: DGL's ``GraphConv(norm="both")`` over it (``_gcn_norm.BlockNorm``)."""
        block, x_src, x_dst, edge_weight = call.edge_index, call.x_src, call.x_dst, call.extra["edge_weight"]
        if block.num_dst > block.num_src:
            raise ValueError(f"GCNConv: a block's destination i is its source i, so it needs num_dst <= num_src; "
                             f"got a bipartite graph of {block.num_src} sources and {block.num_dst} destinations")
        if not isinstance(x_src, torch.Tensor) or x_src.dim() != 2 or x_src.shape[0] != block.num_src:
            raise ValueError(f"GCNConv: on a block x must be [num_src, F] = [{block.num_src}, F] (the sources' rows; "
                             f"the first num_dst are the destinations'), got "
                             f"{tuple(x_src.shape) if isinstance(x_src, torch.Tensor) else type(x_src).__name__}")
        if x_dst is not None and x_dst.shape[0] != block.num_dst:
            raise ValueError(f"GCNConv: x_dst has {x_dst.shape[0]} rows but the block has {block.num_dst} "
                             f"destinations")
        if self.cached:
            raise ValueError("GCNConv(cached=True) reuses the first graph's normalisation for every call, but sampled "
                             "blocks differ from batch to batch: use cached=False on blocks")
        s = call.structure()
        if not self.normalize:
            w = edge_weights(s, edge_weight, "GCNConv")
        elif edge_weight is not None:
            raise ValueError("GCNConv: on a block the normalisation is DGL's GraphConv(norm='both') over the block's "
                             "degrees, which takes no edge weights here: normalise the weights yourself and pass "
                             "normalize=False, or train on NeighborLoader(subgraph=True) batches, where edge weights "
                             "normalise as on any graph")
        else:
            w = block_norm(s, self.add_self_loops, x_src.dtype, x_src.device)
        # x_dst is not read: the destinations' rows are the sources' first num_dst (DGL's GraphConv too)
        if propagate_first(x_src, self.lin.weight, w):
            out = self.lin(propagate(s, x_src, w, self.backend))
        else:
            out = propagate(s, self.lin(x_src), w, self.backend)
        return add_bias(out, self.bias)

    def _normalised(self, x, edge_index, edge_weight, h):
        def make():
            s = resolve("GCNConv", x, x, edge_index, flow=self.flow)
            return gcn_norm(s, edge_weight, self.add_self_loops, self.improved, h.dtype, h.device)
        return cached_normalisation(self, edge_index, make)

