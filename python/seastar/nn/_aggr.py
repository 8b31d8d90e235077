"""Neighbourhood aggregations of SAGEConv, named as PyG names them (``aggr="mean"``, a list,
or a module), each ``forward(structure, x_src, weight)`` -> [num_dst, ...].

The simple ones (``sum``/``add``, ``mean``, ``max``, ``min``) are one vertex program each;
``var`` / ``std`` are one ``mean`` program over ``[x, x*x]``; ``softmax`` (PyG's
``SoftmaxAggregation``: ``sum_j softmax_j(t * x_j) * x_j`` per feature, ``t`` learnable with
``learn=True``) is one program; a list is PyG's ``MultiAggregation`` (combined by ``mode``:
``"cat"``, ``"proj"``, ``"attn"``, or an element-wise ``"sum"``, ``"mean"``, ``"max"``,
``"min"``, ``"logsumexp"``, ``"std"``, ``"var"``). ``lstm`` (PyG's ``LSTMAggregation``: an
LSTM over each destination's in-neighbours in edge order, which must be sorted by destination)
and any other aggregation module (kept as it is and called as PyG calls one:
``aggr(x_j, index, dim_size=N)``) are plain torch over gathered edge rows, O(E*F): they have no vertex-program form.

Submodule and parameter names follow PyG (``aggrs.3.t``, ``lin.weight``, ``lstm.weight_ih_l0``)
so that a PyG ``SAGEConv``'s state dict loads.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn

from .. import ops as ss
from ..program import vertex_program
from ._linear import HeteroDictLinear, Linear
from ._programs import neighbour_sum, weighted_sum
from ._structure import Structure
from .softmax import edge_softmax


@vertex_program(name="neighbour_mean")
def neighbour_mean(v):
    return ss.mean(e.src.h for e in v.in_edges())


@vertex_program(name="neighbour_max")
def neighbour_max(v):
    return ss.max((e.src.h for e in v.in_edges()), ties="pyg")


@vertex_program(name="neighbour_min")
def neighbour_min(v):
    return ss.min((e.src.h for e in v.in_edges()), ties="pyg")


@vertex_program(name="weighted_mean")
def weighted_mean(v):
    return ss.mean(e.src.h * e.w for e in v.in_edges())


@vertex_program(name="weighted_max")
def weighted_max(v):
    return ss.max((e.src.h * e.w for e in v.in_edges()), ties="pyg")


@vertex_program(name="weighted_min")
def weighted_min(v):
    return ss.min((e.src.h * e.w for e in v.in_edges()), ties="pyg")


@vertex_program(name="softmax_aggregation")
def softmax_aggregation(v):
    """sum over in-edges of softmax(t * x_src) * x_src, per feature (``xt`` = t * x)."""
    alpha = ss.softmax([e.src.xt for e in v.in_edges()])
    return ss.sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))


# kind -> (the plain program, the one weighing each message by ``e.w``)
PROGRAMS = {"sum": (neighbour_sum, weighted_sum), "mean": (neighbour_mean, weighted_mean),
            "max": (neighbour_max, weighted_max), "min": (neighbour_min, weighted_min)}


FUSABLE = ("sum", "mean", "max", "min")  # PyG applies a sparse adjacency's values only for these
NAMES = ("sum", "add", "mean", "max", "min", "var", "std", "softmax", "lstm")


class Aggregation(nn.Module):
    """Base: ``forward(s, x, weight=None, backend=None)`` aggregates ``x`` [num_src, ...] over
    ``s``'s in-edges (``weight`` [E]: a sparse adjacency's values, for the simple aggregations)."""

    linear = False  # commutes with a linear map (so x @ W may be aggregated instead of x)

    def out_channels(self, in_channels: int) -> int:
        return in_channels

    def reset_parameters(self) -> None:
        pass


class SimpleAggregation(Aggregation):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = "sum" if kind == "add" else kind
        self.linear = self.kind in ("sum", "mean")

    def forward(self, s: Structure, x: torch.Tensor, weight: Optional[torch.Tensor] = None,
                backend=None) -> torch.Tensor:
        plain, weighted = PROGRAMS[self.kind]
        if weight is None:
            return s.out(plain(s.graph, backend=backend, h=s.src(x)))
        w = weight.to(x.dtype).reshape((-1,) + (1,) * (x.dim() - 1))
        return s.out(weighted(s.graph, backend=backend, h=s.src(x), w=w))

    def __repr__(self) -> str:
        return f"{self.kind.capitalize()}Aggregation()"


class VarAggregation(Aggregation):
    """``mean(x^2) - mean(x)^2``; ``std`` = ``sqrt(max(var, 1e-5))``, 0 where that is <= sqrt(1e-5)."""

    def __init__(self, std: bool = False, semi_grad: bool = False):
        super().__init__()
        self.std, self.semi_grad = std, semi_grad

    def forward(self, s: Structure, x: torch.Tensor, weight=None, backend=None) -> torch.Tensor:
        f = x.shape[-1]
        if self.semi_grad:
            mean = s.out(neighbour_mean(s.graph, backend=backend, h=s.src(x)))
            with torch.no_grad():
                mean2 = s.out(neighbour_mean(s.graph, backend=backend, h=s.src(x * x)))
        else:
            both = s.out(neighbour_mean(s.graph, backend=backend, h=s.src(torch.cat([x, x * x], -1))))
            mean, mean2 = both[..., :f], both[..., f:]
        var = mean2 - mean * mean
        if not self.std:
            return var
        out = var.clamp(min=1e-5).sqrt()
        return out.masked_fill(out <= math.sqrt(1e-5), 0.0)

    def __repr__(self) -> str:
        return "StdAggregation()" if self.std else "VarAggregation()"


class SoftmaxAggregation(Aggregation):
    def __init__(self, t: float = 1.0, learn: bool = False, semi_grad: bool = False, channels: int = 1):
        super().__init__()
        if learn and semi_grad:
            raise ValueError("Cannot enable 'semi_grad' in 'SoftmaxAggregation' in case the temperature term 't' "
                             "is learnable")
        if not learn and channels != 1:
            raise ValueError("Cannot set 'channels' greater than '1' in case 'SoftmaxAggregation' is not trainable")
        self._init_t, self.learn, self.semi_grad, self.channels = t, learn, semi_grad, channels
        self.t = nn.Parameter(torch.empty(channels)) if learn else t
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if isinstance(self.t, torch.Tensor):
            with torch.no_grad():
                self.t.fill_(self._init_t)

    def forward(self, s: Structure, x: torch.Tensor, weight=None, backend=None) -> torch.Tensor:
        t = self.t
        if isinstance(t, torch.Tensor):
            xt = x * (t.view(-1, self.channels) if self.channels != 1 else t)
        else:
            xt = x if t == 1 else x * t
        if self.semi_grad:  # the attention is a constant for backward
            with torch.no_grad():
                src, _ = s.edge_index.to(x.device)
                alpha = edge_softmax(s.graph, xt[src], backend=backend)
            return s.out(weighted_sum(s.graph, backend=backend, h=s.src(x), w=alpha))
        return s.out(softmax_aggregation(s.graph, backend=backend, h=s.src(x), xt=s.src(xt)))

    def __repr__(self) -> str:
        return f"SoftmaxAggregation(learn={self.learn})"


class LSTMAggregation(Aggregation):
    def __init__(self, in_channels: int, out_channels: int, **kwargs):
        super().__init__()
        self.in_channels, self.out_channels_ = in_channels, out_channels
        self.lstm = nn.LSTM(in_channels, out_channels, batch_first=True, **kwargs)
        self.reset_parameters()

    def out_channels(self, in_channels: int) -> int:
        return self.out_channels_

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()

    def forward(self, s: Structure, x: torch.Tensor, weight=None, backend=None) -> torch.Tensor:
        src, dst = s.edge_index.to(x.device)
        if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
            raise ValueError("Can not perform aggregation since the 'index' tensor is not sorted. Specifically, "
                             "LSTMAggregation needs the edges sorted by destination (sort edge_index by its "
                             "second row)")
        dense = to_dense_batch(x[src], dst, s.num_dst)
        return self.lstm(dense)[0][:, -1]

    def __repr__(self) -> str:
        return f"LSTMAggregation({self.in_channels}, {self.out_channels_})"


def to_dense_batch(x: torch.Tensor, index: torch.Tensor, num: int) -> torch.Tensor:
    """Rows grouped by a sorted ``index`` into ``[num, max_count, F]``, zero-padded at the end."""
    count = torch.bincount(index, minlength=num)
    width = int(count.max()) if count.numel() and index.numel() else 0
    start = torch.cumsum(count, 0) - count
    pos = torch.arange(index.numel(), device=x.device) - start[index]
    out = x.new_zeros((num, max(width, 1)) + tuple(x.shape[1:]))
    out[index, pos] = x
    return out


def reset(aggr: nn.Module) -> None:
    if hasattr(aggr, "reset_parameters"):
        aggr.reset_parameters()


def aggregate(aggr: nn.Module, s: Structure, x: torch.Tensor, weight: Optional[torch.Tensor] = None,
              backend=None) -> torch.Tensor:
    """``aggr`` over ``s``'s in-edges; a module that is not one of these aggregations (e.g. one
    of PyG's) is called as PyG calls one, with the gathered source row of every edge."""
    if isinstance(aggr, Aggregation):
        return aggr(s, x, weight, backend=backend)
    src, dst = s.edge_index.to(x.device)
    return aggr(x[src], dst, dim_size=s.num_dst)


def out_channels_of(aggr: nn.Module, in_channels: int) -> int:
    if isinstance(aggr, Aggregation):
        return aggr.out_channels(in_channels)
    get = getattr(aggr, "get_out_channels", None)
    if get is not None:
        return int(get(in_channels))
    return int(getattr(aggr, "out_channels", None) or in_channels)


class MultiAggregation(Aggregation):
    DENSE = ("sum", "mean", "max", "min", "logsumexp", "std", "var")

    def __init__(self, aggrs: Sequence, aggrs_kwargs: Optional[List[Dict[str, Any]]] = None,
                 mode: Optional[str] = "cat", mode_kwargs: Optional[Dict[str, Any]] = None, in_channels: int = None):
        super().__init__()
        if not isinstance(aggrs, (list, tuple)) or len(aggrs) == 0:
            raise ValueError(f"'aggrs' of 'MultiAggregation' should be a non-empty list or tuple (got {aggrs!r})")
        if aggrs_kwargs is None:
            aggrs_kwargs = [{}] * len(aggrs)
        elif len(aggrs_kwargs) != len(aggrs):
            raise ValueError(f"'aggrs_kwargs' with invalid length passed to 'MultiAggregation' (got "
                             f"'{len(aggrs_kwargs)}', expected '{len(aggrs)}'). Ensure that both 'aggrs' and "
                             f"'aggrs_kwargs' are consistent.")
        self.aggrs = nn.ModuleList([resolve(a, in_channels, **kw) for a, kw in zip(aggrs, aggrs_kwargs)])
        if mode not in ("cat", "proj", "attn") + self.DENSE:
            raise ValueError(f"Combine mode '{mode}' is not supported.")
        self.mode = mode
        mode_kwargs = copy.copy(mode_kwargs) or {}
        self.in_channels = mode_kwargs.pop("in_channels", None)
        self.out_channels_ = mode_kwargs.pop("out_channels", None)
        if mode in ("proj", "attn"):
            if len(aggrs) == 1:
                raise ValueError("Multiple aggregations are required for 'proj' or 'attn' combine mode.")
            if self.in_channels is None or self.out_channels_ is None:
                raise ValueError(f"Combine mode '{mode}' must have `in_channels` and `out_channels` specified.")
            if isinstance(self.in_channels, int):
                self.in_channels = [self.in_channels] * len(aggrs)
            if mode == "proj":
                self.lin = Linear(sum(self.in_channels), self.out_channels_, **mode_kwargs)
            else:
                self.lin_heads = HeteroDictLinear({str(k): v for k, v in enumerate(self.in_channels)},
                                                  self.out_channels_)
                num_heads = mode_kwargs.pop("num_heads", 1)
                self.multihead_attn = nn.MultiheadAttention(self.out_channels_, num_heads, **mode_kwargs)

    def out_channels(self, in_channels: int) -> int:
        if self.out_channels_ is not None:
            return self.out_channels_
        if self.mode == "cat":
            return sum(out_channels_of(a, in_channels) for a in self.aggrs)
        return in_channels

    def reset_parameters(self) -> None:
        for a in self.aggrs:
            reset(a)
        if self.mode == "proj":
            self.lin.reset_parameters()
        if self.mode == "attn":
            self.lin_heads.reset_parameters()
            self.multihead_attn._reset_parameters()

    def forward(self, s: Structure, x: torch.Tensor, weight=None, backend=None) -> torch.Tensor:
        outs = [aggregate(a, s, x, backend=backend) for a in self.aggrs]
        if len(outs) == 1:
            return outs[0]
        if self.mode == "cat":
            return torch.cat(outs, dim=-1)
        if self.mode == "proj":
            return self.lin(torch.cat(outs, dim=-1))
        if self.mode == "attn":
            heads = self.lin_heads({str(k): v for k, v in enumerate(outs)})
            stacked = torch.stack([heads[str(k)] for k in range(len(outs))], dim=0)
            return self.multihead_attn(stacked, stacked, stacked)[0].mean(dim=0)
        out = getattr(torch, self.mode)(torch.stack(outs, dim=0), dim=0)
        return out if isinstance(out, torch.Tensor) else out[0]

    def __repr__(self) -> str:
        inner = ",\n".join(f"  {a}" for a in self.aggrs) + ",\n"
        return f"MultiAggregation([\n{inner}], mode={self.mode})"


def resolve(aggr, in_channels: Optional[int] = None, **kwargs) -> nn.Module:
    """An aggregation from a name (PyG's: "mean", "MeanAggregation", ...), a list, an
    ``Aggregation`` or any other aggregation module."""
    if isinstance(aggr, Aggregation):
        return aggr
    if isinstance(aggr, (list, tuple)):
        return MultiAggregation(aggr, in_channels=in_channels, **kwargs)
    if isinstance(aggr, nn.Module):  # any other aggregation module, e.g. one of PyG's
        return aggr
    if not isinstance(aggr, str):
        raise TypeError(f"aggr must be a name, a list of names or an aggregation module, got {type(aggr).__name__}")
    name = aggr.lower().replace("_", "")
    name = name[:-len("aggregation")] if name.endswith("aggregation") and name != "aggregation" else name
    if name in ("sum", "add", "mean", "max", "min"):
        if kwargs:
            raise TypeError(f"the {name!r} aggregation takes no options, got {sorted(kwargs)}")
        return SimpleAggregation(name)
    if name in ("var", "std"):
        return VarAggregation(std=name == "std", **kwargs)
    if name == "softmax":
        return SoftmaxAggregation(**kwargs)
    if name == "lstm":
        kwargs.setdefault("in_channels", in_channels)
        kwargs.setdefault("out_channels", in_channels)
        if kwargs["in_channels"] is None or kwargs["in_channels"] <= 0:
            raise ValueError("the 'lstm' aggregation needs a known input width (no lazy in_channels)")
        return LSTMAggregation(**kwargs)
    raise ValueError(f"Could not resolve '{aggr}' among choices {list(NAMES)} (a list of these, or an aggregation "
                     f"module, also works)")
