"""HGTDictConv: HGTConv with PyG's interface, ``HGTConv(in_channels, out_channels, metadata,
heads)`` (which builds this class) and ``conv(x_dict, edge_index_dict) -> out_dict``, keyed by
node types and ``(src, rel, dst)`` edge types, with PyG's parameter layout (so a PyG
``HGTConv``'s state dict loads):

* ``kqv_lin.lins.<node type>`` [3*out, in_t] and ``out_lin.lins.<node type>`` [out, out]
  (per-type linears; ``in_channels`` an int, a dict per node type, or -1: lazy);
* ``k_rel.weight``, ``v_rel.weight`` [H*R, D, D]: the relation matrices of head ``h`` and edge
  type ``r`` at row ``h*R + r`` (PyG's ``HeteroLinear``);
* ``p_rel.<src>__<rel>__<dst>`` [1, H] (the prior ``mu``) and ``skip.<node type>`` [1].

The computation is the typed :class:`HGTConv`'s ``per_pair`` path on one graph: the node types
present in ``x_dict`` are stacked into one vertex set (in the layer's node-type order) and the
edge types into one typed graph, built once per set of ``edge_index`` tensors (identity and version);
each (source, relation) pair's key and value are transformed once, and one vertex program
computes the softmax over all in-edges of a vertex (every relation together) and the weighted
sum. Outputs exist for the node types that are the destination of some edge type of the
metadata; the gated residual applies where a type's input width equals ``out_channels``.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..graph import Graph
from ._linear import HeteroDictLinear
from ._precision import float32_inside
from ._programs import hgt_pairs
from ._structure import check_edge_index, from_sparse, is_sparse_tensor_like, is_torch_sparse, plain_edge_index
from ._tensor_cache import GRAPHS
from .hgt_conv import HGTConv, is_metadata
from .relation_pairs import per_relation, relation_pairs


class TypedWeight(nn.Module):
    """PyG's ``HeteroLinear`` without bias: ``weight`` [T, in, out], U(+-1/sqrt(in)) at reset."""

    def __init__(self, in_channels: int, out_channels: int, num_types: int):
        super().__init__()
        self.in_channels, self.out_channels, self.num_types = in_channels, out_channels, num_types
        self.weight = nn.Parameter(torch.empty(num_types, in_channels, out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_channels)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, num_types={self.num_types})"


class HGTDictConv(HGTConv, metadata_form=True):
    """PyG's ``HGTConv``: built by ``HGTConv(in_channels, out_channels, metadata, heads)``.

    A subclass of :class:`HGTConv` only so that ``isinstance(conv, HGTConv)`` holds for either
    form; it shares none of the typed layer's code or state (its ``__init__`` starts from
    ``nn.Module``'s), and the typed layer's graph methods (``mode_costs``, ...) do not apply to
    it. ``mode`` is accepted and unused: this form always transforms per (source, relation)
    pair."""

    metadata_mode = True

    def __init__(self, in_channels, out_channels: int, metadata=None, heads: int = 1, mode: str = "auto",
                 backend: Optional[str] = None):
        nn.Module.__init__(self)  # not HGTConv.__init__: the typed layer's parameters are not this layer's
        self.mode, self.backend = mode, backend
        if not is_metadata(metadata):
            raise ValueError("HGTConv: metadata must be (node_types, edge_types) with (src, rel, dst) edge types")
        if out_channels % heads:
            raise ValueError(f"'out_channels' (got {out_channels}) must be divisible by the number of heads "
                             f"(got {heads})")
        node_types, edge_types = list(metadata[0]), [tuple(t) for t in metadata[1]]
        for src, _, dst in edge_types:
            if src not in node_types or dst not in node_types:
                raise ValueError(f"HGTConv: edge type {(src, _, dst)} of the metadata names a node type that is not "
                                 f"in its node types {node_types}")
        if not isinstance(in_channels, dict):
            in_channels = {t: in_channels for t in node_types}
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.node_types, self.edge_types = node_types, edge_types
        self.edge_types_map = {t: i for i, t in enumerate(edge_types)}
        self.dst_node_types = {t[-1] for t in edge_types}
        self.kqv_lin = HeteroDictLinear(in_channels, 3 * out_channels)
        self.out_lin = HeteroDictLinear({t: out_channels for t in node_types}, out_channels)
        d = out_channels // heads
        self.k_rel = TypedWeight(d, d, heads * len(edge_types))
        self.v_rel = TypedWeight(d, d, heads * len(edge_types))
        self.skip = nn.ParameterDict({t: nn.Parameter(torch.empty(1)) for t in node_types})
        self.p_rel = nn.ParameterDict({"__".join(t): nn.Parameter(torch.empty(1, heads)) for t in edge_types})
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.kqv_lin.reset_parameters()
        self.out_lin.reset_parameters()
        self.k_rel.reset_parameters()
        self.v_rel.reset_parameters()
        with torch.no_grad():
            for p in list(self.skip.values()) + list(self.p_rel.values()):
                p.fill_(1.0)

    @float32_inside
    def forward(self, x_dict, edge_index_dict=None) -> Dict[str, torch.Tensor]:
        """PyG's ``forward(x_dict, edge_index_dict) -> out_dict``, or ``forward(hetero_data)``."""
        x_dict, edge_index_dict = dict_inputs(x_dict, edge_index_dict)
        H, C = self.heads, self.out_channels
        D = C // H
        R = len(self.edge_types)
        kqv = self.kqv_lin(x_dict)  # the node types the layer knows, in its order
        sizes = {t: int(v.shape[0]) for t, v in kqv.items()}
        graph, offsets, total = combined_graph(self, sizes, edge_index_dict)
        k, q, v = (torch.cat(parts) for parts in zip(*(torch.tensor_split(val, 3, dim=1) for val in kqv.values())))
        k, q, v = k.view(total, H, D), q.view(total, H, D), v.view(total, H, D)
        k_rel = self.k_rel.weight.view(H, R, D, D)
        v_rel = self.v_rel.weight.view(H, R, D, D)
        mu = torch.stack([self.p_rel["__".join(t)].view(H) for t in self.edge_types]) / math.sqrt(D)  # [R, H]
        pairs = relation_pairs(graph, R, "HGTConv")
        m = pairs.graph.num_nodes
        kp = per_relation(k, pairs, lambda ks, r: torch.einsum("nhd,hde->nhe", ks, k_rel[:, r]) * mu[r].unsqueeze(-1),
                          m)
        vp = per_relation(v, pairs, lambda vs, r: torch.einsum("nhd,hde->nhe", vs, v_rel[:, r]), m)
        qp = q if m == total else torch.cat([q, q.new_zeros(m - total, H, D)])
        agg = hgt_pairs(pairs.graph, backend=self.backend, k=kp, q=qp, val=vp)[:total].reshape(total, C)
        out_types = [t for t in kqv if t in self.dst_node_types]
        a = self.out_lin({t: F.gelu(agg[offsets[t]:offsets[t] + sizes[t]]) for t in out_types})
        out = {}
        for t in out_types:
            o = a[t]
            if o.shape[-1] == x_dict[t].shape[-1]:
                beta = self.skip[t].sigmoid()
                o = beta * o + (1 - beta) * x_dict[t]
            out[t] = o
        return out

    def __repr__(self) -> str:
        return f"HGTConv(-1, {self.out_channels}, heads={self.heads})"  # PyG's, whose class this stands for


def _edges(et, adj, sizes: Dict[str, int]) -> torch.Tensor:
    src, _, dst = et
    adj, carried = plain_edge_index("HGTConv", adj)  # PyG's EdgeIndex: its sizes must be the node types'
    for dim, (want, t) in enumerate(zip(carried or (None, None), (src, dst))):
        if want is not None and want != sizes[t]:
            raise ValueError(f"HGTConv: the EdgeIndex of {et} has sparse size {tuple(carried)} but node type {t!r} "
                             f"has {sizes[t]} vertices (dimension {dim})")
    if is_torch_sparse(adj) or is_sparse_tensor_like(adj):
        s = from_sparse(adj)
        if (s.num_src, s.num_dst) != (sizes[src], sizes[dst]):
            raise ValueError(f"HGTConv: the adjacency of {et} is [{s.num_dst}, {s.num_src}] but the node types have "
                             f"{sizes[dst]} and {sizes[src]} vertices")
        return s.edge_index
    if not isinstance(adj, torch.Tensor):
        raise TypeError(f"HGTConv: edge_index_dict[{et}] must be a [2, E] tensor or a sparse adjacency, "
                        f"got {type(adj).__name__}")
    return adj


def combined_graph(layer, sizes: Dict[str, int], edge_index_dict) -> Tuple[Graph, Dict[str, int], int]:
    """One typed graph over the stacked node types (offsets by type), relation = the edge type's
    position in the metadata; cached per set of edge tensors."""
    offsets, total = {}, 0
    for t, n in sizes.items():
        offsets[t], total = total, total + n
    keys = list(edge_index_dict)
    for et in keys:
        if et not in layer.edge_types_map:
            raise ValueError(f"HGTConv: edge type {et} is not in the layer's metadata {layer.edge_types}")
        if et[0] not in sizes or et[-1] not in sizes:
            raise ValueError(f"HGTConv: edge type {et} needs features of node types {et[0]!r} and {et[-1]!r} "
                             f"in x_dict")
    tensors = [_edges(et, edge_index_dict[et], sizes) for et in keys]

    def make():
        parts, types = [], []
        for et, ei in zip(keys, tensors):
            check_edge_index(ei, sizes[et[0]], sizes[et[-1]])
            ei = ei.detach().to("cpu", torch.int64)
            parts.append(torch.stack([ei[0] + offsets[et[0]], ei[1] + offsets[et[-1]]]))
            types.append(torch.full((ei.shape[1],), layer.edge_types_map[et], dtype=torch.int64))
        ei = torch.cat(parts, 1) if parts else torch.zeros(2, 0, dtype=torch.int64)
        t = torch.cat(types) if types else torch.zeros(0, dtype=torch.int64)
        return Graph.from_edge_index(ei.contiguous(), num_nodes=total, edge_type=t,
                                     num_edge_types=len(layer.edge_types))
    extra = ("hgt", tuple(keys), tuple(sizes.items()), len(layer.edge_types))
    if not tensors:
        return make(), offsets, total
    return GRAPHS.get(tensors[0], extra, make, also=tensors[1:]), offsets, total


def dict_inputs(x_dict, edge_index_dict) -> Tuple[dict, dict]:
    """``(x_dict, edge_index_dict)``, also from a ``HeteroData``-like object."""
    if edge_index_dict is None and hasattr(x_dict, "x_dict") and hasattr(x_dict, "edge_index_dict"):
        return x_dict.x_dict, x_dict.edge_index_dict
    if not isinstance(x_dict, dict) or not isinstance(edge_index_dict, dict):
        raise TypeError("HGTConv built with metadata takes (x_dict, edge_index_dict) or a HeteroData object, got "
                        f"{type(x_dict).__name__} and {type(edge_index_dict).__name__}")
    return x_dict, edge_index_dict

