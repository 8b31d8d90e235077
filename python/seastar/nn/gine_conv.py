"""GINEConv: GIN with edge features (Hu et al., "Strategies for Pre-training Graph Neural
Networks", ICLR 2020), with PyG's semantics, as one plain vertex program."""
from __future__ import annotations

from typing import Optional

import torch

from .. import ops as ss
from ..program import vertex_program
from ._layer import HomogeneousLayer
from ._linear import Linear
from ._precision import float32_inside
from ._utils import reset_module


@vertex_program(name="gine_sum")
def gine_sum(v):
    """``sum_e relu(x_j + ea_e)``."""
    return ss.sum(ss.relu(e.src.x + e.ea) for e in v.in_edges())


class GINEConv(HomogeneousLayer):
    r"""``x'_i = nn((1 + eps) x_i + sum_{j -> i} relu(x_j + e_ij))``; PyG's ``GINEConv``.

    ``nn`` is any module applied row-wise, as dense torch after the program; ``eps`` a constant,
    or learned with ``train_eps=True`` (stored as ``eps``, a buffer when fixed, as PyG).
    ``edge_dim``: the edge features are first projected to the input width by ``lin``
    (PyG's name); without it they must already have the input's width. The neighbour sum is the
    plain program ``gine_sum``.

    Calls: ``conv(graph, x, edge_attr)``, PyG's ``conv(x, edge_index, edge_attr, size=None)``,
    ``conv((x_src, x_dst), edge_index, edge_attr)`` (``x_dst=None`` drops the self term),
    ``conv(x, adj_t, edge_attr)`` with ``edge_attr`` in the adjacency's order, ``conv(data)``;
    float16 / bfloat16 compute in float32.
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 edge_dim: Optional[int] = None, backend: Optional[str] = None):
        super().__init__(backend)
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.lin = None
        if edge_dim is not None:  # the input width read as PyG reads it
            first = nn[0] if isinstance(nn, torch.nn.Sequential) else nn
            width = getattr(first, "in_features", None) or getattr(first, "in_channels", None)
            if width is None:
                raise ValueError("GINEConv: could not infer the input width of 'nn' for edge_dim (its first "
                                 "module has neither in_features nor in_channels)")
            self.lin = Linear(edge_dim, width)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)
        if self.lin is not None:
            self.lin.reset_parameters()

    @float32_inside
    def forward(self, x, edge_index=None, edge_attr: Optional[torch.Tensor] = None, size=None) -> torch.Tensor:
        """``forward(graph, x, edge_attr)`` or PyG's ``forward(x, edge_index, edge_attr, size=None)``."""
        call = self.read_call(x, edge_index, size, dense_rows=True, edge_attr=edge_attr)
        x_src, x_dst, edge_attr = call.x_src, call.x_dst, call.extra["edge_attr"]
        s = call.structure()
        if edge_attr is None:
            raise ValueError("GINEConv: edge_attr is required (the messages are relu(x_j + edge_attr))")
        edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if edge_attr.shape[0] != s.num_edges:
            raise ValueError(f"GINEConv: edge_attr has {edge_attr.shape[0]} rows but the graph has {s.num_edges} edges")
        if self.lin is not None:
            edge_attr = self.lin(edge_attr)
        if edge_attr.shape[-1] != x_src.shape[-1]:
            raise ValueError("Node and edge feature dimensionalities do not match. Consider setting the 'edge_dim' "
                             f"attribute of 'GINEConv' (node features: {x_src.shape[-1]}, edge features: "
                             f"{edge_attr.shape[-1]})")
        out = s.out(gine_sum(s.graph, backend=self.backend, x=s.src(x_src), ea=edge_attr.to(x_src.dtype)))
        if x_dst is not None:
            out = out + (1.0 + self.eps.to(x_dst.dtype)) * x_dst[:out.shape[0]]
        return self.nn(call.output(out))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
