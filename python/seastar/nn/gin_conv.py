"""GINConv: the graph isomorphism network layer (Xu et al., ICLR 2019)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .. import ops as ss
from ..graph import Graph
from ..program import vertex_program
from ._utils import check_graph, dense


@vertex_program(name="gin")
def gin(v, eps):
    """(1 + eps) * h_i + sum of h_j over in-edges; eps is a parameter of shape [1]."""
    return (1.0 + eps) * v.h + ss.sum(e.src.h for e in v.in_edges())


class GINConv(nn.Module):
    r"""GIN: ``out_i = nn((1 + eps) * x_i + sum_{j -> i} x_j)``.

    ``nn`` is any module applied row-wise (usually an MLP); ``eps`` is a constant, or a learned
    parameter with ``train_eps=True`` (stored as ``eps`` either way, a buffer when fixed, as PyG).
    The self term and the neighbour sum are one vertex program (``eps`` bound as a parameter);
    ``nn`` is dense torch.

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
        eps = self.eps.to(x.dtype)
        return self.nn(gin(graph, backend=self.backend, h=dense(x), eps=eps))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
