"""TransformerConv: the graph transformer operator of Shi et al., "Masked Label Prediction"
(IJCAI 2021), with PyG's semantics, as one plain vertex program."""
from __future__ import annotations

import itertools
import math
from typing import Optional, Union

import torch

from .. import ops as ss
from ..program import VertexProgram, program_factory, vertex_program
from ._layer import HomogeneousLayer
from ._linear import Linear
from ._precision import float32_inside
from ._utils import dropout_mask
from .gat_conv import attention_result
from .softmax import edge_softmax

@program_factory
def transformer_program(scale: float, edge_features: bool, attention_dropout: bool) -> VertexProgram:
    """``sum_e softmax_e(<k_j (+ ea_e), q_i> * scale) (* m_e) (val_j (+ ea_e))`` per head; ``m``
    is the attention-dropout mask."""
    def key(e):
        return e.src.k + e.ea if edge_features else e.src.k

    def value(e):
        return e.src.val + e.ea if edge_features else e.src.val

    name = "transformer" + ("_edge" if edge_features else "") + ("_dropout" if attention_dropout else "")

    @vertex_program(name=name)
    def transformer(v):
        alpha = ss.softmax([(key(e) * v.q).sum(-1, keepdim=True) * scale for e in v.in_edges()])
        if attention_dropout:
            return ss.sum(a * e.m * value(e) for a, e in zip(alpha, v.in_edges()))
        return ss.sum(a * value(e) for a, e in zip(alpha, v.in_edges()))
    return transformer


@vertex_program(name="transformer_attended")
def attended_sum(v):
    """``sum_e w_e (val_j + ea_e)``: the output for attention weights computed explicitly."""
    return ss.sum(e.w * (e.src.val + e.ea) for e in v.in_edges())


class TransformerConv(HomogeneousLayer):
    r"""``x'_i = W_1 x_i + sum_j alpha_ij (W_2 x_j + W_6 e_ij)``, ``alpha_ij = softmax_j((W_3
    x_i)^T (W_4 x_j + W_6 e_ij) / sqrt(C))``, per head; PyG's ``TransformerConv``.

    Options as PyG: ``heads``, ``concat``, ``beta`` (a learned gate between the skip and the
    aggregate, ``lin_beta``), ``dropout`` on the attention in training, ``edge_dim``, ``bias``,
    ``root_weight`` (the skip ``lin_skip``). Parameters carry PyG's names (``lin_key``,
    ``lin_query``, ``lin_value``, ``lin_edge``, ``lin_skip``, ``lin_beta``). No self loops are
    added, as in PyG; ``edge_attr`` without ``edge_dim`` is refused.

    The attention is the plain program ``transformer_program``: projections in torch, everything
    per edge in the fused kernels. Dropout is a per-edge mask drawn in torch, exactly PyG's
    ``dropout(alpha)``. ``return_attention_weights=True`` returns ``(out, (edge_index, alpha))``,
    ``alpha`` [E, H] computed explicitly.

    Calls: ``conv(graph, x)``, PyG's ``conv(x, edge_index, edge_attr=None,
    return_attention_weights=None)``, ``conv((x_src, x_dst), edge_index)``, ``conv(x, adj_t)``,
    ``conv(data)``; ``in_channels=-1`` is lazy; float16 / bfloat16 compute in float32.
    """

    def __init__(self, in_channels: Union[int, tuple], out_channels: int, heads: int = 1, concat: bool = True,
                 beta: bool = False, dropout: float = 0.0, edge_dim: Optional[int] = None, bias: bool = True,
                 root_weight: bool = True, backend: Optional[str] = None):
        super().__init__(backend)
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"TransformerConv: dropout must be in [0, 1], got {dropout}")
        if heads < 1 or out_channels < 1:
            raise ValueError(f"TransformerConv: heads and out_channels must be >= 1, got {heads} and {out_channels}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.beta, self.root_weight = concat, beta and root_weight, root_weight
        self.dropout, self.edge_dim = float(dropout), edge_dim
        HC = heads * out_channels
        f_src, f_dst = (in_channels, in_channels) if isinstance(in_channels, int) else in_channels
        self.lin_key = Linear(f_src, HC, bias=bias)
        self.lin_query = Linear(f_dst, HC, bias=bias)
        self.lin_value = Linear(f_src, HC, bias=bias)
        self.lin_edge = None if edge_dim is None else Linear(edge_dim, HC, bias=False)
        out = HC if concat else out_channels
        self.lin_skip = Linear(f_dst, out, bias=bias)  # PyG's layer has it even without root_weight
        self.lin_beta = Linear(3 * out, 1, bias=False) if self.beta else None
        self._alpha = None  # PyG's layer holds the attention here between its steps; never set here
        for variant in itertools.product((False, True), repeat=2):  # built here: torch.compile cannot build them
            transformer_program(1.0 / math.sqrt(out_channels), *variant)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge, self.lin_skip, self.lin_beta):
            if lin is not None:
                lin.reset_parameters()

    @float32_inside
    def forward(self, x, edge_index=None, edge_attr: Optional[torch.Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, edge_attr=None,
        return_attention_weights=None)``."""
        call = self.read_call(x, edge_index, None, batches=False, edge_attr=edge_attr)
        x_src, x_dst = call.src_dst()
        H, C = self.heads, self.out_channels
        s = call.structure()
        q = self.lin_query(x_dst).view(-1, H, C)
        tensors = dict(q=s.dst(q), k=s.src(self.lin_key(x_src).view(-1, H, C)),
                       val=s.src(self.lin_value(x_src).view(-1, H, C)))
        ea = self._edge_features(call.extra["edge_attr"], s.num_edges)
        if ea is not None:
            tensors["ea"] = ea
        mask = dropout_mask((s.num_edges, H, 1), self.dropout, q) if self.training and self.dropout > 0 else None
        scale = 1.0 / math.sqrt(C)
        alpha = None
        if return_attention_weights:
            alpha = self._attention(s, scale, **tensors)
            weights = alpha if mask is None else alpha * mask
            ea = tensors.pop("ea", torch.zeros((), dtype=q.dtype, device=q.device).expand(s.num_edges, H, C))
            out = attended_sum(s.graph, backend=self.backend, val=tensors["val"], ea=ea, w=weights)
        else:
            if mask is not None:
                tensors["m"] = mask
            out = transformer_program(scale, ea is not None, mask is not None)(s.graph, backend=self.backend, **tensors)
        out = self._output(s.out(out), x_dst)
        return (out, attention_result(s, alpha[..., 0], x_src.device)) if return_attention_weights else out

    def _edge_features(self, edge_attr: Optional[torch.Tensor], num_edges: int) -> Optional[torch.Tensor]:
        """``lin_edge(edge_attr)`` [E, H, C], or None without edge features (or without edge_dim)."""
        if edge_attr is None:
            return None
        if self.lin_edge is None:  # PyG adds it to the values unprojected, where it broadcasts
            raise ValueError("TransformerConv: edge_attr given to a layer without edge_dim")
        edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if edge_attr.shape[0] != num_edges:
            raise ValueError(f"TransformerConv: edge_attr has {edge_attr.shape[0]} rows but the graph has "
                             f"{num_edges} edges")
        return self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)

    def _attention(self, s, scale: float, q, k, val, ea=None) -> torch.Tensor:
        """alpha [E, H, 1], explicitly (for return_attention_weights)."""
        src, dst = s.edge_index.to(q.device)
        key = k[src] if ea is None else k[src] + ea
        return edge_softmax(s.graph, (key * q[dst]).sum(-1, keepdim=True) * scale, backend=self.backend)

    def _output(self, out: torch.Tensor, x_dst: torch.Tensor) -> torch.Tensor:
        """The heads concatenated or averaged, then the skip (gated with ``beta``)."""
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        if not self.root_weight:
            return out
        x_r = self.lin_skip(x_dst[:out.shape[0]])
        if self.lin_beta is None:
            return out + x_r
        b = torch.sigmoid(self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)))
        return b * x_r + (1 - b) * out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
