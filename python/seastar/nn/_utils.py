"""Helpers shared by the layers of ``seastar.nn``: PyG-style initialisers, dropout masks and a
dense-or-sparse linear map."""
from __future__ import annotations

import math
from typing import Optional

import torch

from ..graph import Graph
from ._column_sum import bias_add


def glorot(t: Optional[torch.Tensor]) -> None:
    """PyG's ``glorot``: uniform in +-sqrt(6 / (fan_in + fan_out)) over the last two axes."""
    if t is None:
        return
    a = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
    with torch.no_grad():
        t.uniform_(-a, a)


def zeros(t: Optional[torch.Tensor]) -> None:
    if t is not None:
        with torch.no_grad():
            t.zero_()


def reset_module(nn) -> None:
    """Re-initialises a user's module (an MLP a layer applies): each submodule's
    ``reset_parameters``, then the module's own, as PyG's ``reset``."""
    if isinstance(nn, torch.nn.Module):
        for m in nn.modules():
            if m is not nn and hasattr(m, "reset_parameters"):
                m.reset_parameters()
    if hasattr(nn, "reset_parameters"):
        nn.reset_parameters()


def check_graph(layer: str, graph, x: Optional[torch.Tensor] = None) -> None:
    if not isinstance(graph, Graph):
        raise TypeError(f"{layer}.forward takes the graph first: forward(graph, x); "
                        f"got {type(graph).__name__} as the graph")
    # x holds the rows read at the sources (every vertex of a square graph; a bipartite block's
    # sources, whose first num_dst rows are its destinations)
    if x is not None and x.shape[0] != graph.num_src:
        what = "sources" if graph.is_bipartite else "vertices"
        raise ValueError(f"{layer}: x has {x.shape[0]} rows but the graph has {graph.num_src} {what}")


def dropout_mask(shape, p: float, like: torch.Tensor) -> torch.Tensor:
    """Inverted-dropout mask: Bernoulli(1 - p) / (1 - p), in ``like``'s dtype and device.

    Drawn as ``uniform >= p`` (about 3x faster than ``bernoulli_`` on CPU; same distribution)."""
    if p >= 1.0:
        return like.new_zeros(shape)
    keep = like.new_empty(shape).uniform_() >= p
    return keep.to(like.dtype).mul_(1.0 / (1.0 - p))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x @ weight.T + bias`` for a dense or a sparse COO ``x`` (sparse bag-of-words features)."""
    if x.is_sparse:
        out = torch.sparse.mm(x, weight.t())
        return out if bias is None else out + bias
    if bias is not None and torch.compiler.is_compiling():
        return bias_add(x @ weight.t(), bias)  # the bias gradient by aten's column sum (``_column_sum``)
    return torch.nn.functional.linear(x, weight, bias)


def add_bias(out: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """``out + bias``, into ``out`` itself when ``out`` is a fresh result that no backward reads
    (the caller vouches for that) and owns its storage. An in-place add into a view would make
    autograd wrap the view's base in ``CopySlices``, whose backward allocates two tensors of the
    base's size: more than the copy it saves. In compiled code, ``bias_add``."""
    if bias is None:
        return out
    if torch.compiler.is_compiling():
        return bias_add(out, bias)
    if out._base is None and out.is_contiguous() and not (out.is_leaf and out.requires_grad):
        return out.add_(bias)
    return out + bias


def all_ones(values: Optional[torch.Tensor]) -> bool:
    """Whether a sparse adjacency's ``values`` (None: it has none) weigh every message by 1, so
    the unweighted program serves."""
    return values is None or bool((values == 1).all())


def dense(x: torch.Tensor) -> torch.Tensor:
    return x.to_dense() if x.is_sparse else x
