"""APPNP: personalised-PageRank propagation (Klicpera et al., ICLR 2019)."""
from __future__ import annotations

from typing import Optional

import torch

from .. import ops as ss
from ..program import VertexProgram, program_factory, vertex_program
from ._gcn_norm import EdgeNorm, VertexNorm, cached_normalisation, explicit_loops, gcn_norm
from ._inputs import edge_weights, resolve
from ._layer import HomogeneousLayer
from ._precision import float32_inside
from ._structure import FLOWS
from ._utils import dropout_mask


@program_factory
def appnp_step(alpha: float) -> VertexProgram:
    """One step ``(1 - alpha) * sum_e w_e h_src + alpha * h0``; alpha is a traced constant, so
    each alpha gets its own (shared) program."""
    @vertex_program(name="appnp_step")
    def step(v):
        return (1.0 - alpha) * ss.sum(e.src.h * e.w for e in v.in_edges()) + alpha * v.h0
    return step


@program_factory
def appnp_symmetric_step(alpha: float) -> VertexProgram:
    """``appnp_step`` with ``w_e = d_src * d_dst`` (no edge weights): the compiler applies
    each degree factor once per vertex."""
    @vertex_program(name="appnp_symmetric_step")
    def step(v):
        return (1.0 - alpha) * ss.sum(e.src.d * e.src.h * e.dst.d for e in v.in_edges()) + alpha * v.h0
    return step


@program_factory
def appnp_symmetric_step_loops(alpha: float) -> VertexProgram:
    """``appnp_symmetric_step`` plus the self loops the graph does not hold, ``l[v] * h[v]``
    (see ``seastar.nn._gcn_norm``)."""
    @vertex_program(name="appnp_symmetric_step_loops")
    def step(v):
        return (1.0 - alpha) * (ss.sum(e.src.d * e.src.h * e.dst.d for e in v.in_edges()) + v.l * v.h) \
            + alpha * v.h0
    return step


@program_factory
def appnp_step_loops(alpha: float) -> VertexProgram:
    """``appnp_step`` plus the self loops the graph does not hold as edges, ``l[v] * h[v]``."""
    @vertex_program(name="appnp_step_loops")
    def step(v):
        return (1.0 - alpha) * (ss.sum(e.src.h * e.w for e in v.in_edges()) + v.l * v.h) + alpha * v.h0
    return step


class APPNP(HomogeneousLayer):
    r"""APPNP propagation: ``h^0 = x``, ``h^{k+1} = (1 - alpha) * A_hat h^k + alpha * x`` for K
    steps, ``A_hat = D^-1/2 (A + I) D^-1/2`` as in :class:`GCNConv` (PyG's self-loop rules,
    optional edge weights, kept by the graph; ``cached=True`` reuses the first call's
    normalised graph for every later call, as in PyG; ``normalize=False`` propagates with the
    raw weights, 1 without ``edge_weight``). With edge weights the normalised weight of every
    edge is computed once per call, in destination order (the steps read them as a stream), and
    the self loops are a per-vertex term (``_gcn_norm.EdgeNorm``); with ``dropout > 0`` the loops
    are edges, each dropped like the others, in PyG's edge order.

    No parameters: a predictor MLP goes before it. Each step is one call of a vertex program that
    computes the propagation and the teleport term together. ``dropout`` (in [0, 1]) is
    DropEdge-style dropout on ``A_hat`` in training, a fresh mask per step (PyG re-drops the
    previous step's already dropped weights; an independent mask per step is what the APPNP
    paper describes; with ``dropout=1`` both give ``alpha * x``).

    A sampled block is refused: the K steps each read the previous step's output at the
    sources, so they need one square graph (``NeighborLoader(subgraph=True)`` yields one per
    mini-batch; K + 1 hops of full fanout make the seeds' outputs the whole graph's).

    Calls: ``prop(graph, x[, edge_weight])``, PyG's ``prop(x, edge_index[, edge_weight])``,
    ``prop(x, adj_t)``, ``prop(data)``; ``x`` [N, F] or [B, N, F] (one graph, a batch of signals).

    Memory per forward + backward (floats; N vertices, E' = edges with self loops, F channels,
    K steps): a step is linear in h, so its backward kernels read no step's output and autograd
    keeps none of them: the fused backend keeps ``N * F`` (x) and ``N`` degree factors (``E``
    edge weights with edge weights, ``E'`` with edge dropout, and ``K * E'`` dropout masks when
    training with ``dropout > 0``), plus one step's temporaries at a time: ``O(N * F + E')``, independent of K, no
    ``O(E * F)`` tensor. The reference backend keeps each step's inputs and materialises its messages,
    ``O(K * (N * F + E' * F))``.
    """

    def __init__(self, K: int, alpha: float, dropout: float = 0.0, cached: bool = False,
                 add_self_loops: bool = True, normalize: bool = True, flow: str = "source_to_target",
                 backend: Optional[str] = None):
        super().__init__(backend)
        if K < 0:
            raise ValueError(f"APPNP: K must be >= 0, got {K}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"APPNP: dropout must be in [0, 1], got {dropout}")
        if flow not in FLOWS:
            raise ValueError(f"APPNP: flow must be one of {FLOWS}, got {flow!r}")
        self.K, self.alpha, self.dropout = int(K), float(alpha), float(dropout)
        self.cached, self.add_self_loops, self.normalize, self.flow = bool(cached), add_self_loops, normalize, flow
        appnp_step(self.alpha)  # built here: torch.compile cannot build them
        appnp_symmetric_step(self.alpha)
        appnp_symmetric_step_loops(self.alpha)
        appnp_step_loops(self.alpha)
        self._cached_edge_index = None
        self._cached_adj_t = None

    def reset_parameters(self) -> None:
        self._cached_edge_index = None
        self._cached_adj_t = None

    @float32_inside
    def forward(self, x, edge_index=None, edge_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward(graph, x, edge_weight=None)`` or PyG's ``forward(x, edge_index, edge_weight=None)``."""
        call = self.read_call(x, edge_index, pairs=False, edge_weight=edge_weight)
        if call.on_block:
            # step k + 1 reads step k's output at the sources, which a block's destinations are not
            raise ValueError("APPNP propagates K times over one graph, so it needs a square graph; a sampled block "
                             "maps its sources to its destinations once. For mini-batches use "
                             "NeighborLoader(subgraph=True): with K + 1 hops of full fanout the seeds' outputs are "
                             "the whole graph's")
        x = call.x_src
        s, w = self._propagation(x, call.edge_index, call.extra["edge_weight"])
        edge_dropout = self.training and self.dropout > 0.0
        if isinstance(w, EdgeNorm):
            return call.output(self._propagate_edge_norm(s, x, w))
        if isinstance(w, VertexNorm):
            if not edge_dropout:  # the per-vertex form: d^-1/2 applied once per vertex, no edge weights
                return call.output(self._propagate_vertex_norm(s, x, w))
            s, w = explicit_loops(s, w)  # dropout needs the loops as edges
        step = appnp_step(self.alpha)
        g, h0 = s.graph, s.src(x)
        h = h0
        for _ in range(self.K):
            wk = w
            if edge_dropout:
                wk = w * dropout_mask(w.shape, self.dropout, w)
            h = step(g, backend=self.backend, h=h, w=wk, h0=h0)
        return call.output(s.out(h))

    def _propagate_edge_norm(self, s, x, norm: EdgeNorm) -> torch.Tensor:
        step, g, h0 = appnp_step_loops(self.alpha), s.graph, s.src(x)
        w, loop = norm.w.to(x.dtype), s.dst(norm.loop.to(x.dtype))
        h = h0
        for _ in range(self.K):
            h = step(g, backend=self.backend, h=h, w=w, l=loop, h0=h0)
        return s.out(h)

    def _propagate_vertex_norm(self, s, x, norm: VertexNorm) -> torch.Tensor:
        g, h0, d = s.graph, s.src(x), s.src(norm.dinv.to(x.dtype))
        h = h0
        if norm.loop is None:
            step = appnp_symmetric_step(self.alpha)
            for _ in range(self.K):
                h = step(g, backend=self.backend, h=h, d=d, h0=h0)
        else:
            step, loop = appnp_symmetric_step_loops(self.alpha), s.dst(norm.loop.to(x.dtype))
            for _ in range(self.K):
                h = step(g, backend=self.backend, h=h, d=d, l=loop, h0=h0)
        return s.out(h)

    def _propagation(self, x, edge_index, edge_weight):
        if not self.normalize:
            s = resolve("APPNP", x, x, edge_index, flow=self.flow)
            w = edge_weights(s, edge_weight, "APPNP")
            w = x.new_ones(s.num_edges) if w is None else w.to(x.dtype)
            return s, w.unsqueeze(-1)
        def make():
            s = resolve("APPNP", x, x, edge_index, flow=self.flow)
            # with edge weights the K steps read normalised weights per edge, computed once per call
            # (in destination order, streamed), rather than applying the vertex factors on every
            # step; edge dropout draws a mask per edge of the graph with its loops, in PyG's order
            form = "loops_as_edges" if self.dropout > 0.0 else "edge"
            return gcn_norm(s, edge_weight, self.add_self_loops, False, x.dtype, x.device, "APPNP", form)
        return cached_normalisation(self, edge_index, make)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(K={self.K}, alpha={self.alpha})"
