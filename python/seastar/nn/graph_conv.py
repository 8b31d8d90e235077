"""GraphConv: the operator of Morris et al., "Weisfeiler and Leman Go Neural" (AAAI 2019), with
PyG's semantics."""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch

from ._aggr import SimpleAggregation, aggregate
from ._inputs import edge_weights
from ._layer import HomogeneousLayer
from ._linear import Linear
from ._precision import float32_inside
from ._utils import dense, linear

AGGRS = ("add", "sum", "mean", "max", "min")  # the aggregations that weigh each message by its edge


class GraphConv(HomogeneousLayer):
    r"""``out_i = W_1 x_i + W_2 aggr_{e = (j -> i)} w_e x_j`` (``lin_root(x_i) + lin_rel(aggr)``).

    ``aggr``: ``"add"`` (default) / ``"sum"``, ``"mean"``, ``"max"`` or ``"min"``, one vertex
    program each; an empty neighbourhood aggregates to 0, as in PyG. ``w_e`` is ``edge_weight``
    ([E], 1 without; read as given and differentiable) or, for a sparse ``adj_t``, its values.
    The bias is ``lin_rel``'s (``bias=False`` drops it); ``lin_root`` has none. Parameter names
    and initialisation are PyG's (``lin_rel.weight``, ``lin_rel.bias``, ``lin_root.weight``,
    U(+-1/sqrt(in))), so state dicts load both ways.

    Calls: ``conv(graph, x)`` / ``conv(graph, x, edge_weight)``; PyG's ``conv(x, edge_index,
    edge_weight=None, size=None)``, ``conv(x, adj_t)``, ``conv((x_src, x_dst), edge_index)`` with
    ``in_channels=(F_src, F_dst)`` (``x_dst=None``: no root term), ``conv(data)``; on a sampled
    block (a bipartite ``seastar.Graph``) ``x`` holds the sources' rows, the first ``num_dst``
    being the destinations'. ``x`` [N, F] or [B, N, F] (one graph, a batch of signals);
    ``in_channels=-1`` is lazy; float16 / bfloat16 compute in float32.

    For ``add`` / ``mean`` (linear in ``x``) and ``out < in`` the layer aggregates ``x W_2``
    rather than ``x``: the same value, a narrower program. The fused backend keeps no
    edge-sized tensor but the weights given.
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, aggr: str = "add",
                 bias: bool = True, backend: Optional[str] = None):
        super().__init__(backend)
        if aggr not in AGGRS:
            raise ValueError(f"GraphConv: aggr must be one of {AGGRS}, got {aggr!r}")
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        src, dst = (in_channels, in_channels) if isinstance(in_channels, int) else in_channels
        self.aggr_module = SimpleAggregation(aggr)
        self.lin_rel = Linear(src, out_channels, bias=bias)
        self.lin_root = Linear(dst, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_rel.reset_parameters()
        self.lin_root.reset_parameters()

    @float32_inside
    def forward(self, x, edge_index=None, edge_weight: Optional[torch.Tensor] = None, size=None) -> torch.Tensor:
        """``forward(graph, x, edge_weight=None)`` or PyG's ``forward(x, edge_index,
        edge_weight=None, size=None)``."""
        call = self.read_call(x, edge_index, size, edge_weight=edge_weight)
        x_src, x_dst, edge_weight = call.x_src, call.x_dst, call.extra["edge_weight"]
        if x_src is None:
            raise TypeError("GraphConv: x (or x_src) must be a [N, F] tensor, got None")
        s = call.structure()
        if edge_weight is not None and s.values is not None:
            raise ValueError("GraphConv: a sparse adjacency's values are its edge weights; pass edge_weight with an "
                             "edge_index or a seastar.Graph, or put the weights in the adjacency")
        w = edge_weights(s, edge_weight, "GraphConv")
        if self.aggr_module.linear and self.out_channels < x_src.shape[-1]:
            self.lin_rel.materialize(x_src.shape[-1])
            out = aggregate(self.aggr_module, s, linear(x_src, self.lin_rel.weight), w, backend=self.backend)
            if self.lin_rel.bias is not None:
                out = out + self.lin_rel.bias
        else:
            out = self.lin_rel(aggregate(self.aggr_module, s, dense(x_src), w, backend=self.backend))
        if x_dst is not None:
            out = out + self.lin_root(x_dst)
        return call.output(out)
