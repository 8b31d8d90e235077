"""One dense product per group of consecutive rows, as a torch op: ``seastar::segment_matmul``.

``out[rows of group g] = x[rows of group g] @ weight[g]``, the groups' sizes given as a tensor
``counts``. The typed linears and the per-relation transforms group rows by node type or relation;
eagerly they split by sizes known in Python (kept by the graph), but compiled code serves graphs of
every size, so their sizes are data there. This op takes them as data, and compiled code sees only
its output's shape, ``[rows of x, columns of weight]``: symbolic like ``x``'s, whatever the groups.
Its gradients are ops of the same kind (``segment_matmul`` with the transposed weights for ``x``,
``segment_outer`` for ``weight``), so a compiled backward needs no graph break either.
"""
from __future__ import annotations

from typing import List

import torch


def _bounds(counts: torch.Tensor, rows: int, op: str) -> List[int]:
    sizes = [int(c) for c in counts.tolist()]
    if any(c < 0 for c in sizes) or sum(sizes) != rows:
        raise ValueError(f"seastar::{op}: the group sizes {sizes} must be non-negative and add up to the {rows} rows")
    return sizes


@torch.library.custom_op("seastar::segment_matmul", mutates_args=())
def segment_matmul(x: torch.Tensor, counts: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x`` [N, in] in groups of ``counts`` [G] rows, ``weight`` [G, in, out] -> [N, out]."""
    if x.dim() != 2 or weight.dim() != 3 or weight.shape[1] != x.shape[1] or counts.numel() != weight.shape[0]:
        raise ValueError(f"seastar::segment_matmul: x {tuple(x.shape)}, counts {tuple(counts.shape)} and weight "
                         f"{tuple(weight.shape)} do not fit ([N, in], [G], [G, in, out])")
    out = x.new_empty((x.shape[0], weight.shape[2]))
    start = 0
    for g, c in enumerate(_bounds(counts, x.shape[0], "segment_matmul")):
        if c:
            torch.mm(x[start:start + c], weight[g], out=out[start:start + c])
        start += c
    return out


@segment_matmul.register_fake
def _segment_matmul_fake(x, counts, weight):
    return x.new_empty((x.shape[0], weight.shape[2]))


@torch.library.custom_op("seastar::segment_outer", mutates_args=())
def segment_outer(x: torch.Tensor, grad: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``x_g^T @ grad_g`` per group -> [G, in, out] (zeros for an empty group): the weight's gradient."""
    out = x.new_zeros((counts.numel(), x.shape[1], grad.shape[1]))
    start = 0
    for g, c in enumerate(_bounds(counts, x.shape[0], "segment_outer")):
        if c:
            torch.mm(x[start:start + c].t(), grad[start:start + c], out=out[g])
        start += c
    return out


@segment_outer.register_fake
def _segment_outer_fake(x, grad, counts):
    return x.new_empty((counts.shape[0], x.shape[1], grad.shape[1]))


def _setup_context(ctx, inputs, output):
    x, counts, weight = inputs
    ctx.save_for_backward(x, counts, weight)


def _backward(ctx, grad):
    x, counts, weight = ctx.saved_tensors
    grad = grad.contiguous()
    gx = segment_matmul(grad, counts, weight.transpose(1, 2).contiguous()) if ctx.needs_input_grad[0] else None
    gw = segment_outer(x, grad, counts) if ctx.needs_input_grad[2] else None
    return gx, None, gw


segment_matmul.register_autograd(_backward, setup_context=_setup_context)
