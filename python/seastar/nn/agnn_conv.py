"""AGNNConv: the attention-based propagation of Thekumparampil et al., "Attention-based Graph
Neural Network for Semi-Supervised Learning" (2018), with PyG's semantics, as one plain vertex
program."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .. import ops as ss
from ..program import vertex_program
from ._layer import HomogeneousLayer
from ._loops import with_loops
from ._precision import float32_inside


@vertex_program(name="agnn")
def agnn(v, beta):
    """``sum_e softmax_e(beta * cos(x_i, x_j)) x_j``, ``xn`` the rows normalised."""
    alpha = ss.softmax([beta * (e.src.xn * v.xn).sum(-1, keepdim=True) for e in v.in_edges()])
    return ss.sum(a * e.src.x for a, e in zip(alpha, v.in_edges()))


class AGNNConv(HomogeneousLayer):
    r"""``x'_i = sum_j softmax_j(beta * cos(x_i, x_j)) x_j`` over ``i``'s in-edges (with a self
    loop per vertex, ``add_self_loops=True``); PyG's ``AGNNConv``. ``beta`` is learned
    (``requires_grad=True``) or a buffer of 1. The cosines are the normalised rows' dot products,
    normalised in torch; everything per edge is the plain program ``agnn``.

    Calls: ``conv(graph, x)``, PyG's ``conv(x, edge_index)``, ``conv(x, adj_t)``, ``conv(data)``.
    """

    def __init__(self, requires_grad: bool = True, add_self_loops: bool = True, backend: Optional[str] = None):
        super().__init__(backend)
        self.requires_grad, self.add_self_loops = requires_grad, add_self_loops
        if requires_grad:
            self.beta = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("beta", torch.ones(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.requires_grad:
            with torch.no_grad():
                self.beta.fill_(1.0)

    @float32_inside
    def forward(self, x, edge_index=None) -> torch.Tensor:
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index)``."""
        call = self.read_call(x, edge_index, None, pairs=False, batches=False, dense_rows=True)
        x = call.x_src
        if x is None or x.dim() != 2:
            raise ValueError("AGNNConv: x must be a [N, F] tensor")
        s = call.structure()
        if self.add_self_loops:
            s = with_loops(s).structure
        xn = F.normalize(x, p=2.0, dim=-1)
        out = agnn(s.graph, backend=self.backend, x=s.src(x), xn=s.src(xn), beta=self.beta.to(x.dtype))
        return s.out(out)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
