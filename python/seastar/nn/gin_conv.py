"""GINConv: the graph isomorphism network layer (Xu et al., ICLR 2019)."""
from __future__ import annotations

from typing import Optional

import torch

from .. import ops as ss
from ..program import vertex_program
from ._layer import HomogeneousLayer
from ._precision import float32_inside
from ._programs import propagate
from ._utils import all_ones, reset_module


@vertex_program(name="gin_sum_with_self")
def sum_with_self(v):
    """The neighbour sum plus the vertex's own term ``r = (1 + eps) * x``, written once: no
    separate aggregate, scaled copy and sum of the two."""
    return ss.sum(e.src.h for e in v.in_edges()) + v.r


class GINConv(HomogeneousLayer):
    r"""GIN: ``out_i = nn((1 + eps) * x_i + sum_{j -> i} x_j)``.

    ``nn`` is any module applied row-wise (usually an MLP); ``eps`` is a constant, or a learned
    parameter with ``train_eps=True`` (stored as ``eps`` either way, a buffer when fixed, as PyG).
    The neighbour sum and the self term are one vertex program (``sum_with_self``), which adds
    ``r = (1 + eps) * x_i`` as it writes each row; ``r`` is computed by torch (so a learned
    ``eps`` needs no reduction of a parameter gradient over all rows inside the program) and is
    ``x_i`` itself for a fixed ``eps = 0``. ``nn`` is dense torch.

    Calls: ``conv(graph, x)``; PyG's ``conv(x, edge_index, size=None)``, ``conv(x, adj_t)`` (a
    sparse ``adj_t``'s values weight the sum, as PyG's sparse path does), ``conv((x_src, x_dst),
    edge_index)`` (bipartite; ``x_dst=None`` drops the self term), ``conv(data)``; ``x`` [N, F] or
    [B, N, F] (one graph, a batch of signals); float16 / bfloat16 compute in float32.

    Memory per forward + backward (floats; N vertices, E edges, F_in input): fused backend
    ``N*F_in`` (x) + ``N*F_in`` (the aggregate) + the MLP's own activations + the same for
    gradients: O(N*F_in + MLP), no O(E*F) tensor. The reference backend materialises the
    gathered neighbour features, O(E*F_in).
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 backend: Optional[str] = None):
        super().__init__(backend)
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    @float32_inside
    def forward(self, x, edge_index=None, size=None) -> torch.Tensor:
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, size=None)``."""
        # a block with global source ids: the sum reads the table in place unless it needs its gradient
        call = self.read_call(x, edge_index, size, dense_rows=True,
                              sources_in_place=lambda t: not t.requires_grad and t.dim() == 2)
        x_src, x_dst = call.x_src, call.x_dst
        s = call.structure()
        w = None if all_ones(s.values) else s.values
        if x_dst is not None and w is None:
            out = s.out(sum_with_self(s.graph, backend=self.backend, h=s.src(x_src), r=s.dst(self._self_term(x_dst))))
        else:
            out = propagate(s, x_src, w, self.backend)
            if x_dst is not None:
                out = out + self._self_term(x_dst)
        return self.nn(call.output(out))

    def _self_term(self, x_dst: torch.Tensor) -> torch.Tensor:
        """``(1 + eps) * x_dst``; ``x_dst`` itself when eps is a fixed 0 (the default), no copy.
        Only a CPU eps is read: reading a GPU one would wait for the device on every call, and
        compiled code reads none (torch.export takes it as an input: its value is data there)."""
        if not torch.compiler.is_compiling() and not self.eps.requires_grad and self.eps.device.type == "cpu" and float(self.eps) == 0.0:
            return x_dst
        return (1.0 + self.eps.to(x_dst.dtype)) * x_dst

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
