"""APPNP: personalised-PageRank propagation (Klicpera et al., ICLR 2019)."""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import nn

from .. import ops as ss
from ..graph import Graph
from ..program import VertexProgram, vertex_program
from ._utils import GraphCache, check_graph, dropout_mask, gcn_norm


@functools.lru_cache(maxsize=None)
def appnp_step(alpha: float) -> VertexProgram:
    """One step ``(1 - alpha) * sum_e w_e h_src + alpha * h0``; alpha is a traced constant, so
    each alpha gets its own (shared) program."""
    @vertex_program(name="appnp_step")
    def step(v):
        return (1.0 - alpha) * ss.sum(e.src.h * e.w for e in v.in_edges()) + alpha * v.h0
    return step


class APPNP(nn.Module):
    r"""APPNP propagation: ``h^0 = x``, ``h^{k+1} = (1 - alpha) * A_hat h^k + alpha * x`` for K
    steps, ``A_hat = D^-1/2 (A + I) D^-1/2`` (as in :class:`GCNConv`, cached per graph uid).

    No parameters: a predictor MLP goes before it. Each step is one call of a vertex program that
    computes the propagation and the teleport term together. ``dropout`` is DropEdge-style
    dropout on ``A_hat`` in training, a fresh mask per step (PyG reuses and re-scales one edge
    weight tensor across steps; an independent mask per step is what the APPNP paper describes).

    Memory per forward + backward (floats; N vertices, E' = E + N edges, F channels, K steps):
    fused backend ``(K + 1)*N*F`` (every step's output is kept for backward) + the same for
    gradients, plus ``E'`` cached edge weights (and ``K*E'`` dropout masks when training with
    ``dropout > 0``): O(K*N*F + E'), no O(E*F) tensor. The reference backend materialises the
    messages of each step, O(K*E'*F) in forward and backward.
    """

    def __init__(self, K: int, alpha: float, dropout: float = 0.0, add_self_loops: bool = True,
                 normalize: bool = True, backend: Optional[str] = None):
        super().__init__()
        if K < 0:
            raise ValueError(f"APPNP: K must be >= 0, got {K}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"APPNP: dropout must be in [0, 1), got {dropout}")
        self.K, self.alpha, self.dropout = int(K), float(alpha), float(dropout)
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.backend = backend
        self._graph_cache = GraphCache(16)

    def reset_parameters(self) -> None:
        pass

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        check_graph("APPNP", graph, x)
        if self.normalize:
            g, w = gcn_norm(self._graph_cache, graph, self.add_self_loops, x.device, x.dtype)
        else:
            g, w = graph, x.new_ones(graph.num_edges, 1)
        step = appnp_step(self.alpha)
        h = x
        for _ in range(self.K):
            wk = w
            if self.training and self.dropout > 0.0:
                wk = w * dropout_mask(w.shape, self.dropout, w)
            h = step(g, backend=self.backend, h=h, w=wk, h0=x)
        return h

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(K={self.K}, alpha={self.alpha})"
