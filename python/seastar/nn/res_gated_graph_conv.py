"""ResGatedGraphConv: the residual gated graph convnet of Bresson and Laurent, "Residual Gated
Graph ConvNets" (2017), with PyG's semantics, as one plain vertex program."""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch

from .. import ops as ss
from ..program import program_factory, vertex_program
from ._layer import HomogeneousLayer
from ._linear import Linear
from ._precision import float32_inside
from ._utils import add_bias, zeros

# the activations a program computes itself; any other module runs in torch on the edge rows
ACTIVATIONS = {torch.nn.Sigmoid: ss.sigmoid, torch.nn.ReLU: ss.relu, torch.nn.Tanh: ss.tanh}


@vertex_program(name="edge_sum")
def edge_sum(v):
    """``sum_e m_e``: the sum of messages computed per edge in torch."""
    return ss.sum(e.m for e in v.in_edges())


@program_factory
def gated_program(act: Optional[type], edge_features: bool):
    """``sum_e act(k_i + q_j (+ g_e)) * (v_j (+ u_e))``: ``g``, ``u`` the edge features' terms."""
    gate = (lambda z: z) if act is None else ACTIVATIONS[act]
    name = "res_gated" + ("_" + act.__name__.lower() if act is not None else "") + ("_edge" if edge_features else "")

    @vertex_program(name=name)
    def res_gated(v):
        if edge_features:
            return ss.sum(gate(v.k + e.src.q + e.g) * (e.src.val + e.u) for e in v.in_edges())
        return ss.sum(gate(v.k + e.src.q) * e.src.val for e in v.in_edges())
    return res_gated


class ResGatedGraphConv(HomogeneousLayer):
    r"""``x'_i = W_1 x_i + sum_j act(W_3 x_i + W_4 x_j) * W_2 x_j (+ bias)``; PyG's
    ``ResGatedGraphConv``, with ``act`` (default ``Sigmoid()``), ``edge_dim`` (the edge features
    concatenated to each of the three projections' inputs), ``root_weight`` and ``bias``.
    Parameters carry PyG's names (``lin_key``, ``lin_query``, ``lin_value``, ``lin_skip``,
    ``bias``).

    The projections run in torch; with edge features, each projection of ``[x, e]`` is split
    into its vertex part and its edge part, so no ``[E, F + edge_dim]`` input is formed. The sum
    is the plain program ``gated_program`` when ``act`` is ``Sigmoid``, ``ReLU``, ``Tanh`` or
    None; any other activation runs in torch on the [E, C] gate rows, and the sum of the
    messages stays a program.

    Calls: ``conv(graph, x)``, PyG's ``conv(x, edge_index, edge_attr=None)``,
    ``conv((x_src, x_dst), edge_index)``, ``conv(x, adj_t)``, ``conv(data)``; ``in_channels=-1``
    is lazy.
    """

    def __init__(self, in_channels: Union[int, tuple], out_channels: int, act: Optional[Callable] = torch.nn.Sigmoid(),
                 edge_dim: Optional[int] = None, root_weight: bool = True, bias: bool = True,
                 backend: Optional[str] = None):
        super().__init__(backend)
        self.in_channels, self.out_channels, self.act = in_channels, out_channels, act
        self.edge_dim, self.root_weight = edge_dim, root_weight
        f_src, f_dst = (in_channels, in_channels) if isinstance(in_channels, int) else in_channels
        d = edge_dim or 0
        self.lin_key = Linear(-1 if f_dst == -1 else f_dst + d, out_channels)
        self.lin_query = Linear(-1 if f_src == -1 else f_src + d, out_channels)
        self.lin_value = Linear(-1 if f_src == -1 else f_src + d, out_channels)
        self.lin_skip = Linear(f_dst, out_channels, bias=False) if root_weight else None
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self._act_type = type(act) if act is not None and type(act) in ACTIVATIONS else None
        for edges in (False, True):  # built here: torch.compile cannot build them
            gated_program(self._act_type, edges)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_skip):
            if lin is not None:
                lin.reset_parameters()
        zeros(self.bias)

    @float32_inside
    def forward(self, x, edge_index=None, edge_attr: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, edge_attr=None)``."""
        call = self.read_call(x, edge_index, None, batches=False, dense_rows=True, edge_attr=edge_attr)
        x_src, x_dst = call.src_dst()
        edge_attr = call.extra["edge_attr"]
        if (edge_attr is None) != (self.edge_dim is None):
            raise ValueError("ResGatedGraphConv: edge_attr must be given exactly when the layer has edge_dim "
                             f"(edge_dim={self.edge_dim}, edge_attr {'given' if edge_attr is not None else 'missing'})")
        s = call.structure()
        F_src, F_dst = x_src.shape[-1], x_dst.shape[-1]
        d = 0 if edge_attr is None else (1 if edge_attr.dim() == 1 else edge_attr.shape[-1])
        for lin, width in ((self.lin_key, F_dst), (self.lin_query, F_src), (self.lin_value, F_src)):
            lin.materialize(width + d)  # lazy in_channels=-1: the width of this first call
        k = self.lin_key.weight[:, :F_dst]
        t = dict(k=s.dst(x_dst @ k.t() + self.lin_key.bias),
                 q=s.src(x_src @ self.lin_query.weight[:, :F_src].t() + self.lin_query.bias),
                 val=s.src(x_src @ self.lin_value.weight[:, :F_src].t() + self.lin_value.bias))
        if edge_attr is not None:
            edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
            t["g"] = edge_attr @ (self.lin_key.weight[:, F_dst:] + self.lin_query.weight[:, F_src:]).t()
            t["u"] = edge_attr @ self.lin_value.weight[:, F_src:].t()
        if self.act is None or self._act_type is not None:
            out = gated_program(self._act_type, edge_attr is not None)(s.graph, backend=self.backend, **t)
        else:  # an activation no program computes: the gates in torch, the sum a program
            out = edge_sum(s.graph, backend=self.backend, m=self._messages(s, t))
        out = s.out(out)
        if self.lin_skip is not None:
            out = out + self.lin_skip(x_dst[:out.shape[0]])
        return add_bias(out, self.bias)

    def _messages(self, s, t) -> torch.Tensor:
        """``act(k_i + q_j (+ g_e)) * (v_j (+ u_e))`` per edge, [E, C], in torch."""
        src, dst = s.edge_index.to(t["k"].device)
        z = t["k"][dst] + t["q"][src]
        v = t["val"][src]
        if "g" in t:
            z, v = z + t["g"], v + t["u"]
        return self.act(z) * v

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
