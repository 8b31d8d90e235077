"""GCNConv: the graph convolution of Kipf & Welling (ICLR 2017) as a vertex program."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .. import ops as ss
from ..graph import Graph
from ..program import vertex_program
from ._utils import GraphCache, check_graph, gcn_norm, glorot, linear, zeros


@vertex_program(name="gcn_weighted_sum")
def weighted_sum(v):
    """sum over in-edges of w[e] * h[src]: the propagation of GCN and APPNP."""
    return ss.sum(e.src.h * e.w for e in v.in_edges())


@vertex_program(name="neighbour_sum")
def neighbour_sum(v):
    """sum over in-edges of h[src]."""
    return ss.sum(e.src.h for e in v.in_edges())


class GCNConv(nn.Module):
    r"""Graph convolution: ``out = D^-1/2 (A + I) D^-1/2 (x W) + b``.

    Per vertex ``i``: ``out_i = b + sum_{e = (j -> i)} w_e * (x_j W)`` with
    ``w_e = 1 / sqrt(d_j * d_i)`` and ``d`` the in-degree in ``A + I``. ``A + I`` is built with
    ``graph.add_self_loops()``, which appends one loop per vertex (a vertex that already has a
    self loop then has two, as the formula says; PyG's ``add_remaining_self_loops`` would keep
    one). The propagated graph and the edge weights ``[E + N, 1]`` are computed once per graph
    and cached on the layer, keyed by the graph's uid (a few recent graphs are kept).
    ``normalize=False`` follows PyG: no normalisation and no self loops, a plain sum over
    in-edges. Weights are initialised with glorot, the bias with zeros (as PyG).

    ``x W`` is dense torch (``x`` may be a sparse COO tensor, e.g. bag-of-words features); the
    propagation is one vertex program (``sum(e.src.h * e.w)``).

    Memory per forward + backward (floats; N vertices, E edges, E' = E + N with self loops,
    F_in -> F_out): fused backend ``N*F_in`` (x, kept for the weight gradient) + ``N*F_out``
    (x W) + ``N*F_out`` (output) + the same again for gradients, plus ``E'`` cached edge weights:
    O(N*(F_in + F_out) + E'), no O(E*F) tensor. The reference backend (plain torch)
    additionally materialises the gathered messages, O(E'*F_out) in forward and in backward.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True,
                 add_self_loops: bool = True, normalize: bool = True, backend: Optional[str] = None):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.backend = backend  # None: the program's default ("auto")
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self._graph_cache = GraphCache(16)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot(self.lin.weight)
        zeros(self.bias)

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        check_graph("GCNConv", graph, x)
        h = linear(x, self.lin.weight)
        if self.normalize:
            g, w = gcn_norm(self._graph_cache, graph, self.add_self_loops, h.device, h.dtype)
            out = weighted_sum(g, backend=self.backend, h=h, w=w)
        else:
            out = neighbour_sum(graph, backend=self.backend, h=h)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
