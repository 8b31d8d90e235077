"""GATConv: graph attention (Velickovic et al., ICLR 2018) as one vertex program."""
from __future__ import annotations

import functools
from typing import Optional

import torch
from torch import nn

from .. import ops as ss
from ..graph import Graph
from ..program import VertexProgram, vertex_program
from ._utils import GraphCache, check_graph, dropout_mask, glorot, linear, self_loop_graph, zeros


@functools.lru_cache(maxsize=None)
def gat_program(negative_slope: float, attention_dropout: bool) -> VertexProgram:
    """The GAT aggregation for one slope; with ``attention_dropout`` it also reads a mask ``e.m``.

    Programs are traced per signature of the bound tensors; the slope is a constant baked into
    the trace, so each slope gets its own program (shared by all layers using it)."""
    if attention_dropout:
        @vertex_program(name="gat_dropout")
        def gat(v):
            scores = [ss.leaky_relu(e.src.el + v.er, negative_slope) for e in v.in_edges()]
            alpha = ss.softmax(scores)
            return ss.sum(a * e.m * e.src.h for a, e in zip(alpha, v.in_edges()))
    else:
        @vertex_program(name="gat")
        def gat(v):
            scores = [ss.leaky_relu(e.src.el + v.er, negative_slope) for e in v.in_edges()]
            alpha = ss.softmax(scores)
            return ss.sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))
    return gat


class GATConv(nn.Module):
    r"""Graph attention: per head ``k``, ``h = x W`` split into heads ``[N, H, C]``,

    ``s_e = leaky_relu(<h_j, a_src> + <h_i, a_dst>)`` for an edge ``e = (j -> i)``,
    ``alpha_e = softmax_{e into i}(s_e)`` (max-subtracted), ``out_i = sum_e alpha_e * h_j``,
    then heads concatenated ``[N, H*C]`` (``concat=True``) or averaged ``[N, C]``, plus bias.

    ``x W`` (``x`` may be a sparse COO tensor) and the per-vertex halves of the score,
    ``el = <h, a_src>`` and ``er = <h, a_dst>`` (``[N, H, 1]``), are dense torch; leaky_relu,
    the softmax and the weighted sum are one vertex program, so the fused backend computes it
    in a single traversal (online softmax) without edge-sized tensors.
    As in PyG, existing self loops are removed and one loop per vertex is added
    (``add_self_loops=True``; the loop graph is cached per graph uid).

    Attention dropout: vertex programs contain no randomness, so dropout on ``alpha`` is a
    per-edge mask ``m`` ``[E, H, 1]`` (Bernoulli(1-p)/(1-p)) drawn in torch and bound as an edge
    feature: the program returns ``sum_e alpha_e * m_e * h_j``, which is exactly PyG's
    ``dropout(alpha)`` followed by the weighted sum. In eval mode (or with ``dropout=0``) the mask
    is all ones, so the program without the mask is used instead (same result, no E-sized input).

    Memory per forward + backward (floats; N vertices, E edges incl. self loops, H heads, C
    channels per head, F_in input): fused backend ``N*F_in`` (x) + ``N*H*C`` (h) + ``2*N*H``
    (el, er) + ``N*H*C`` (output) + O(N*H) softmax statistics (max, sum) + the same again for
    gradients, plus ``E*H`` for the attention-dropout mask when training with ``dropout > 0``:
    O(N*H*(C + F_in/H) + E*H), no O(E*H*C) tensor. The reference backend materialises the scores,
    the attention and the messages, O(E*H*C) in forward and in backward.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 bias: bool = True, backend: Optional[str] = None):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"GATConv: dropout must be in [0, 1), got {dropout}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, float(negative_slope), float(dropout)
        self.add_self_loops = add_self_loops
        self.backend = backend
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        if bias:
            self.bias = nn.Parameter(torch.empty(heads * out_channels if concat else out_channels))
        else:
            self.register_parameter("bias", None)
        self._graph_cache = GraphCache(8)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot(self.lin.weight)
        glorot(self.att_src)
        glorot(self.att_dst)
        zeros(self.bias)

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        check_graph("GATConv", graph, x)
        H, C = self.heads, self.out_channels
        h = linear(x, self.lin.weight).view(-1, H, C)
        el = (h * self.att_src).sum(-1, keepdim=True)  # [N, H, 1]
        # er is read at the destinations: on a bipartite block, of its first num_dst sources
        er = ((h[: graph.num_dst] if graph.is_bipartite else h) * self.att_dst).sum(-1, keepdim=True)
        g = self_loop_graph(self._graph_cache, graph, remove_existing=True) if self.add_self_loops else graph
        if self.training and self.dropout > 0.0:
            m = dropout_mask((g.num_edges, H, 1), self.dropout, h)
            out = gat_program(self.negative_slope, True)(g, backend=self.backend, h=h, el=el, er=er, m=m)
        else:
            out = gat_program(self.negative_slope, False)(g, backend=self.backend, h=h, el=el, er=er)
        out = out.reshape(-1, H * C) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
