"""GATv2Conv: the dynamic attention of Brody et al., "How Attentive are Graph Attention
Networks?" (ICLR 2022), with PyG's semantics, as one plain vertex program."""
from __future__ import annotations

import itertools
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from .. import ops as ss
from ..program import VertexProgram, program_factory, vertex_program
from ._layer import HomogeneousLayer
from ._linear import Linear
from ._loops import loop_ids, loop_values, with_loops
from ._precision import float32_inside
from ._programs import weighted_sum
from ._utils import add_bias, dropout_mask, glorot, zeros
from .gat_conv import attention_result
from .softmax import edge_softmax


@program_factory
def gatv2_program(negative_slope: float, edge_features: bool, attention_dropout: bool) -> VertexProgram:
    """``sum_e softmax_e(<leaky_relu(xl_j + xr_i (+ ea_e)), att>) (* m_e) xl_j`` per head, for one
    slope; ``m`` is the attention-dropout mask."""
    def score(v, e, att):
        z = e.src.xl + v.xr
        if edge_features:
            z = z + e.ea
        return (ss.leaky_relu(z, negative_slope) * att).sum(-1, keepdim=True)

    name = "gatv2" + ("_edge" if edge_features else "") + ("_dropout" if attention_dropout else "")

    @vertex_program(name=name)
    def gatv2(v, att):
        alpha = ss.softmax([score(v, e, att) for e in v.in_edges()])
        if attention_dropout:
            return ss.sum(a * e.m * e.src.xl for a, e in zip(alpha, v.in_edges()))
        return ss.sum(a * e.src.xl for a, e in zip(alpha, v.in_edges()))
    return gatv2


class GATv2Conv(HomogeneousLayer):
    r"""``x'_i = sum_j alpha_ij W_l x_j`` with ``alpha_ij = softmax_j(a^T leaky_relu(W_l x_j +
    W_r x_i (+ W_e e_ij)))``, per head; PyG's ``GATv2Conv``.

    Options as PyG: ``heads``, ``concat`` (heads concatenated, or averaged), ``negative_slope``,
    ``dropout`` on the attention in training, ``add_self_loops`` (existing loops replaced, their
    ``edge_attr`` ``fill_value``: a number, a tensor or a reduction such as ``"mean"``),
    ``edge_dim``, ``bias``, ``share_weights`` (``lin_r`` is ``lin_l``), ``residual``.
    Parameters carry PyG's names (``lin_l``, ``lin_r``, ``att`` [1, H, C], ``lin_edge``, ``res``,
    ``bias``), so state dicts load both ways.

    The attention is the plain program ``gatv2_program``: the dense projections run in torch,
    everything per edge in the fused kernels, and the compiler's plan decides what its backward
    stores (save_edge_values.h). Dropout is a per-edge mask ``m`` drawn in torch (programs hold
    no randomness), exactly PyG's ``dropout(alpha)``. ``return_attention_weights=True`` returns
    ``(out, (edge_index, alpha))``, with ``alpha`` [E, H] computed explicitly.

    Calls: ``conv(graph, x)``, PyG's ``conv(x, edge_index, edge_attr=None,
    return_attention_weights=None)``, ``conv((x_src, x_dst), edge_index)``, ``conv(x, adj_t)``,
    ``conv(data)``; ``in_channels=-1`` is lazy; float16 / bfloat16 compute in float32.
    """

    def __init__(self, in_channels: Union[int, tuple], out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: Optional[int] = None, fill_value: Union[float, torch.Tensor, str] = "mean",
                 bias: bool = True, share_weights: bool = False, residual: bool = False,
                 backend: Optional[str] = None):
        super().__init__(backend)
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"GATv2Conv: dropout must be in [0, 1], got {dropout}")
        if heads < 1 or out_channels < 1:
            raise ValueError(f"GATv2Conv: heads and out_channels must be >= 1, got {heads} and {out_channels}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, float(negative_slope), float(dropout)
        self.add_self_loops, self.edge_dim, self.fill_value = add_self_loops, edge_dim, fill_value
        self.share_weights, self.residual = share_weights, residual
        HC = heads * out_channels
        f_src, f_dst = (in_channels, in_channels) if isinstance(in_channels, int) else in_channels
        self.lin_l = Linear(f_src, HC, bias=bias, weight_initializer="glorot")
        self.lin_r = self.lin_l if share_weights else Linear(f_dst, HC, bias=bias, weight_initializer="glorot")
        self.att = nn.Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = None if edge_dim is None else Linear(edge_dim, HC, bias=False, weight_initializer="glorot")
        total_out = HC if concat else out_channels
        self.res = Linear(f_dst, total_out, bias=False, weight_initializer="glorot") if residual else None
        self.bias = nn.Parameter(torch.empty(total_out)) if bias else None
        for variant in itertools.product((False, True), repeat=2):  # built here: torch.compile cannot build them
            gatv2_program(self.negative_slope, *variant)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # PyG's order, so that a seeded initialisation draws the same numbers
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        glorot(self.att)
        zeros(self.bias)

    @float32_inside
    def forward(self, x, edge_index=None, edge_attr: Optional[torch.Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, edge_attr=None,
        return_attention_weights=None)``."""
        call = self.read_call(x, edge_index, None, batches=False, edge_attr=edge_attr)
        x_src, x_dst = call.src_dst()
        H, C = self.heads, self.out_channels
        xl = self.lin_l(x_src).view(-1, H, C)
        xr = xl if self.share_weights and x_dst is x_src else self.lin_r(x_dst).view(-1, H, C)
        s, ea = self._structure(call.structure(), call.extra["edge_attr"])
        mask = dropout_mask((s.num_edges, H, 1), self.dropout, xl) if self.training and self.dropout > 0 else None
        tensors = dict(xl=s.src(xl), xr=s.dst(xr), att=self.att.view(H, C))
        if ea is not None:
            tensors["ea"] = ea
        if return_attention_weights:
            alpha = self._attention(s, **tensors)
            weights = alpha if mask is None else alpha * mask
            out = s.out(weighted_sum(s.graph, backend=self.backend, h=s.src(xl), w=weights))
            return self._output(out, x_dst), attention_result(s, alpha[..., 0], x_src.device)
        if mask is not None:
            tensors["m"] = mask
        prog = gatv2_program(self.negative_slope, ea is not None, mask is not None)
        return self._output(s.out(prog(s.graph, backend=self.backend, **tensors)), x_dst)

    def _structure(self, s, edge_attr: Optional[torch.Tensor]):
        """``(s, ea)``: the structure with PyG's self loops when the layer adds them, and the
        projected edge features [E, H, C] (None without ``edge_dim``)."""
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError("GATv2Conv: edge_attr given to a layer without edge_dim")
        if edge_attr is not None:
            edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
            if edge_attr.shape[0] != s.num_edges:
                raise ValueError(f"GATv2Conv: edge_attr has {edge_attr.shape[0]} rows but the graph has "
                                 f"{s.num_edges} edges")
        if self.add_self_loops:
            lg = with_loops(s)
            if edge_attr is not None:
                edge_attr = loop_values(lg, loop_ids(s, lg), edge_attr, self.fill_value, "replace")
            s = lg.structure
        ea = None if edge_attr is None else self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)
        return s, ea

    def _attention(self, s, xl, xr, att, ea=None) -> torch.Tensor:
        """alpha [E, H, 1], explicitly (for return_attention_weights)."""
        src, dst = s.edge_index.to(xl.device)
        z = xl[src] + xr[dst] + (0 if ea is None else ea)
        score = (F.leaky_relu(z, self.negative_slope) * att).sum(-1, keepdim=True)
        return edge_softmax(s.graph, score, backend=self.backend)

    def _output(self, out: torch.Tensor, x_dst: torch.Tensor) -> torch.Tensor:
        """The heads [N, H, C] concatenated or averaged, plus the residual and the bias."""
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if self.res is not None:
            out = out + self.res(x_dst[:out.shape[0]])
        return add_bias(out, self.bias)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
