"""SAGEConv: GraphSAGE (Hamilton et al., NeurIPS 2017) with PyG's semantics."""
from __future__ import annotations

from typing import Any, Dict, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ._aggr import FUSABLE, SimpleAggregation, aggregate, out_channels_of, reset, resolve as resolve_aggr
from ._layer import HomogeneousLayer
from ._linear import Linear, is_uninitialized
from ._linear_pair import linear_pair
from ._precision import float32_inside
from ._utils import add_bias, all_ones, dense, linear


class SAGEConv(HomogeneousLayer):
    r"""GraphSAGE: ``out_i = W_l aggr_{j -> i}(x_j) + b + W_r x_i`` (``lin_l(aggr) + lin_r(x_i)``).

    ``aggr``: ``"mean"`` (default), ``"sum"`` / ``"add"``, ``"max"``, ``"min"``, ``"var"``,
    ``"std"``, ``"softmax"``, ``"lstm"``, a list of these (concatenated, or combined as
    ``aggr_kwargs=dict(mode=...)`` says) or an aggregation module; see ``seastar.nn._aggr``.
    An empty neighbourhood aggregates to 0, as in PyG. ``root_weight=False`` drops the
    ``W_r x_i`` term; ``normalize=True`` L2-normalises each output row; ``project=True`` first
    maps the sources through ``relu(lin(x_j))``. Parameter names follow PyG (``lin_l.weight``,
    ``lin_l.bias``, ``lin_r.weight``, ``lin.*``, ``aggr_module.*``); weights glorot, bias zeros.

    Calls: ``conv(graph, x)``; PyG's ``conv(x, edge_index, size=None)``, ``conv(x, adj_t)`` (the
    values of a sparse ``adj_t`` weight the messages of sum / mean / max / min, as PyG's sparse
    path does), ``conv((x_src, x_dst), edge_index)`` with ``in_channels=(F_src, F_dst)``
    (``x_dst=None``: no root term), ``conv(data)``; ``x`` [N, F] or [B, N, F] (one graph, a
    batch of signals); ``in_channels=-1`` is lazy; float16 / bfloat16 compute in float32.

    The aggregation is one vertex program. For ``mean`` / ``sum`` (linear) and ``out < in`` the
    layer projects first and aggregates ``x W_l`` (the same value, a narrower program); where the
    destinations' rows are the sources' first rows (a block called with one tensor, or one
    graph's ``x``) the two maps are one product, ``x [W_l; W_r]``. The other aggregations
    aggregate ``x`` itself.

    Memory per forward + backward (floats; N vertices, E edges, F_in -> F_out, A = the width
    aggregated: min(F_in, F_out) for mean, F_in otherwise): fused backend ``N*F_in`` (x) +
    ``N*A`` (aggregate) + ``2*N*F_out`` (the two projections and their sum) + the same for
    gradients (max keeps an O(N*F_in) argmax index for backward): O(N*(F_in + F_out)), no O(E*F)
    tensor (except ``lstm`` and aggregation modules). The reference backend materialises the
    gathered neighbour features, O(E*A).
    """

    def __init__(self, in_channels: Union[int, tuple], out_channels: int,
                 aggr: Union[str, list, nn.Module, None] = "mean", normalize: bool = False, root_weight: bool = True,
                 project: bool = False, bias: bool = True, aggr_kwargs: Optional[Dict[str, Any]] = None,
                 backend: Optional[str] = None):
        super().__init__(backend)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        pair = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
        if project and pair[0] <= 0:
            raise ValueError(f"'{self.__class__.__name__}' does not support lazy initialization with `project=True`")
        if aggr is None:
            raise ValueError("SAGEConv: aggr must be given (a name, a list of names or a module)")
        self.aggr_module: nn.Module = resolve_aggr(aggr, pair[0] if pair[0] > 0 else None, **(aggr_kwargs or {}))
        # PyG keeps the name (or list) and prints it; a module prints as itself
        self.aggr = aggr if isinstance(aggr, (str, list, tuple)) else str(self.aggr_module)
        if project:
            self.lin = Linear(pair[0], pair[0], bias=True)
        aggr_out = out_channels_of(self.aggr_module, pair[0]) if pair[0] > 0 else -1
        self.lin_l = Linear(aggr_out, out_channels, bias=bias, weight_initializer="glorot",
                            bias_initializer="zeros")
        self.lin_r = Linear(pair[1], out_channels, bias=False, weight_initializer="glorot") if root_weight else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset(self.aggr_module)
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.lin_r is not None:
            self.lin_r.reset_parameters()

    @float32_inside
    def forward(self, x, edge_index=None, size=None) -> torch.Tensor:
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, size=None)``."""
        call = self.read_call(x, edge_index, size, sources_in_place=self._aggregates_table)
        x_src, x_dst = call.x_src, call.x_dst
        s = call.structure()
        if self.project:
            x_src = F.relu(self.lin(x_src))
        weight = None
        if s.values is not None and isinstance(self.aggr_module, SimpleAggregation) \
                and self.aggr_module.kind in FUSABLE and not all_ones(s.values):
            weight = s.values
        agg = self.aggr_module
        fresh = True  # `out` is a tensor no autograd node saved: the root term may add into it
        if getattr(agg, "linear", False) and self.out_channels < self._width(x_src):
            self.lin_l.materialize(self._width(x_src))
            if self._root_in_product(call, x_src, x_dst):
                return self._finish(call, self._project_both(agg, s, x_src, weight))
            out = aggregate(agg, s, linear(x_src, self.lin_l.weight), weight, backend=self.backend)
            if self.lin_l.bias is not None:
                out = add_bias(out, self.lin_l.bias)  # the aggregate is fresh: no backward reads it
            else:
                fresh = False  # the aggregation's own output
        else:
            h = aggregate(agg, s, dense(x_src), weight, backend=self.backend)
            if self._pairs_root(h, x_dst):
                # the bias apart from the products: traced, Inductor adds it in the pass of what
                # follows (an activation), where inside the op it is a [rows, out] copy of its own
                out = linear_pair(h, self.lin_l.weight, x_dst, self.lin_r.weight, None)
                return self._finish(call, add_bias(out, self.lin_l.bias))
            out = self.lin_l(h)
        if self.lin_r is not None and x_dst is not None:
            out = self._add_root(out, x_dst, fresh)
        return self._finish(call, out)

    def _root_in_product(self, call, x_src: torch.Tensor, x_dst) -> bool:
        """Whether the destinations' rows are the sources' first rows (a block's one tensor, or
        one graph's ``x``), dense and 2-D, so ``_project_both`` serves."""
        return (call.dst_rows_first and not self.project and self.lin_r is not None
                and isinstance(x_dst, torch.Tensor) and not x_src.is_sparse and x_src.dim() == 2
                and not is_uninitialized(self.lin_r.weight) and x_src.dtype == self.lin_l.weight.dtype
                == self.lin_r.weight.dtype)

    def _project_both(self, agg, s, x_src: torch.Tensor, weight) -> torch.Tensor:
        """``aggr(x W_l) + b + x_dst W_r`` with both maps one product ``x [W_l; W_r]``: the
        destinations' rows are the sources' first rows, so ``x_dst W_r`` is the first rows of
        ``x W_r``. One pass over ``x`` forward, and backward one product for ``x``'s gradient
        (the two maps' gradients side by side in a [N, 2 * out] tensor) where separate maps
        give two [rows, in] gradients and their sum."""
        c = self.out_channels
        both = x_src @ torch.cat([self.lin_l.weight, self.lin_r.weight]).t()  # [num_src, 2 * out]
        # the aggregate is fresh and no backward reads it: the bias and the root term add into it
        out = add_bias(aggregate(agg, s, both[:, :c], weight, backend=self.backend), self.lin_l.bias)
        return out.add_(both[:s.num_dst, c:])

    def _finish(self, call, out: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return call.output(out)

    def _pairs_root(self, h: torch.Tensor, x_dst) -> bool:
        """Whether ``lin_l(h) + lin_r(x_dst)`` goes through ``seastar::linear_pair``: in compiled
        code, for dense 2-D rows of one dtype (eagerly ``_add_root``'s in-place product does the
        same work; see ``_linear_pair``)."""
        return (torch.compiler.is_compiling() and self.lin_r is not None and isinstance(x_dst, torch.Tensor)
                and not x_dst.is_sparse and x_dst.dim() == 2 and h.dim() == 2
                and not is_uninitialized(self.lin_l.weight) and not is_uninitialized(self.lin_r.weight)
                and h.dtype == x_dst.dtype == self.lin_l.weight.dtype == self.lin_r.weight.dtype)

    def _aggregates_table(self, x_src: torch.Tensor) -> bool:
        """Whether a block with global source ids can aggregate ``x_src`` (the whole table) in
        place: only when the sources' rows are aggregated as they are (projecting first would
        transform every row of the table) and need no gradient (which would be table-sized)."""
        agg = self.aggr_module
        return (isinstance(agg, SimpleAggregation) and agg.kind in FUSABLE and not self.project
                and not x_src.requires_grad and x_src.dim() == 2
                and not (getattr(self.aggr_module, "linear", False) and self.out_channels < x_src.shape[-1]))

    def _add_root(self, out: torch.Tensor, x_dst: torch.Tensor, fresh: bool) -> torch.Tensor:
        """``out + lin_r(x_dst)``; for dense 2-D rows one ``addmm``, which writes a single
        [num_dst, out] tensor where ``lin_r`` and the sum would allocate two (and read one back).
        When ``fresh`` (``out`` is lin_l's output, which no backward reads) the product adds into
        ``out`` itself: no second [num_dst, out] tensor, and no copy of ``out`` into it."""
        if x_dst.is_sparse or x_dst.dim() != 2 or out.dim() != 2 or out.dtype != x_dst.dtype:
            return out + self.lin_r(x_dst)
        self.lin_r.materialize(x_dst.shape[-1])
        if fresh and out.is_contiguous():
            return out.addmm_(x_dst, self.lin_r.weight.t())
        return torch.addmm(out, x_dst, self.lin_r.weight.t())

    @staticmethod
    def _width(x: torch.Tensor) -> int:
        return x.shape[-1]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"
