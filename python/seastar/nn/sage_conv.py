"""SAGEConv: GraphSAGE (Hamilton et al., NeurIPS 2017) with PyG's semantics."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .. import ops as ss
from ..graph import Graph
from ..program import vertex_program
from ._utils import check_graph, dense, glorot, linear, zeros


@vertex_program(name="neighbour_mean")
def neighbour_mean(v):
    return ss.mean(e.src.h for e in v.in_edges())


@vertex_program(name="neighbour_max")
def neighbour_max(v):
    return ss.max(e.src.h for e in v.in_edges())


_PROGRAMS = {"mean": neighbour_mean, "max": neighbour_max}


class SAGEConv(nn.Module):
    r"""GraphSAGE: ``out_i = W_l aggr_{j -> i}(x_j) + b + W_r x_i`` (``lin_l(aggr) + lin_r(x_i)``).

    ``aggr`` is ``"mean"`` or ``"max"`` over in-neighbours (0 for a vertex without in-edges,
    as PyG); ``root_weight=False`` drops the ``W_r x_i`` term; ``normalize=True`` L2-normalises
    each output row. Parameter names follow PyG (``lin_l.weight``, ``lin_l.bias``,
    ``lin_r.weight``); weights glorot, bias zeros.

    The aggregation is one vertex program. For ``mean`` (linear) and ``out < in`` the layer
    projects first and averages ``x W_l`` (the same value, a narrower program); ``max`` always
    aggregates ``x`` itself.

    Memory per forward + backward (floats; N vertices, E edges, F_in -> F_out, A = the width
    aggregated: min(F_in, F_out) for mean, F_in for max): fused backend ``N*F_in`` (x) + ``N*A``
    (aggregate) + ``2*N*F_out`` (the two projections and their sum) + the same for gradients
    (max keeps an O(N*F_in) argmax index for backward): O(N*(F_in + F_out)), no O(E*F) tensor. The
    reference backend materialises the gathered neighbour features, O(E*A) in forward and backward.
    """

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean", normalize: bool = False,
                 root_weight: bool = True, bias: bool = True, backend: Optional[str] = None):
        super().__init__()
        if aggr not in _PROGRAMS:
            raise ValueError(f"SAGEConv: aggr must be one of {sorted(_PROGRAMS)}, got {aggr!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr, self.normalize, self.root_weight = aggr, normalize, root_weight
        self.backend = backend
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False) if root_weight else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot(self.lin_l.weight)
        zeros(self.lin_l.bias)
        if self.lin_r is not None:
            glorot(self.lin_r.weight)

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        check_graph("SAGEConv", graph, x)
        prog = _PROGRAMS[self.aggr]
        if self.aggr == "mean" and self.out_channels < self.in_channels:
            out = prog(graph, backend=self.backend, h=linear(x, self.lin_l.weight))
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        else:
            out = self.lin_l(prog(graph, backend=self.backend, h=dense(x)))
        if self.lin_r is not None:  # the destinations' own rows (the first num_dst of a block's sources)
            out = out + linear(x[: graph.num_dst] if graph.is_bipartite else x, self.lin_r.weight)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr!r})"
