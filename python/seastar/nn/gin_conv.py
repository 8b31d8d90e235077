"""GINConv: the graph isomorphism network layer (Xu et al., ICLR 2019)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..graph import Graph
from ._utils import check_graph, dense
from .gcn_conv import neighbour_sum


class GINConv(nn.Module):
    r"""GIN: ``out_i = nn((1 + eps) * x_i + sum_{j -> i} x_j)``.

    ``nn`` is any module applied row-wise (usually an MLP); ``eps`` is a constant, or a learned
    parameter with ``train_eps=True`` (stored as ``eps`` either way, a buffer when fixed, as PyG).
    The neighbour sum is a vertex program; the self term ``(1 + eps) * x_i`` and ``nn`` are dense
    torch (kept out of the program so a learned ``eps`` needs no reduction of a parameter
    gradient over all rows inside it).

    Memory per forward + backward (floats; N vertices, E edges, F_in input): fused backend
    ``N*F_in`` (x) + ``N*F_in`` (the aggregate) + the MLP's own activations + the same for
    gradients: O(N*F_in + MLP), no O(E*F) tensor. The reference backend materialises the
    gathered neighbour features, O(E*F_in) in forward and backward.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 backend: Optional[str] = None):
        super().__init__()
        self.nn = nn
        self.initial_eps = float(eps)
        self.backend = backend
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for m in self.nn.modules():
            if m is not self.nn and hasattr(m, "reset_parameters"):
                m.reset_parameters()
        if hasattr(self.nn, "reset_parameters"):
            self.nn.reset_parameters()
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        check_graph("GINConv", graph, x)
        x = dense(x)
        agg = neighbour_sum(graph, backend=self.backend, h=x)
        return self.nn((1.0 + self.eps.to(x.dtype)) * x + agg)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
