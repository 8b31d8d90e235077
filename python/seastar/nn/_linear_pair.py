"""``seastar::linear_pair``: ``a @ w_a.T + bias + x @ w_x.T``, both products into one buffer.

A layer that sums two linear maps (SAGE's ``lin_l(aggr) + lin_r(x_i)``) writes them eagerly as
``addmm`` then ``addmm_`` into the same tensor. Compiled code cannot: functionalisation turns the
in-place product into an ``addmm`` with a new output, and Inductor's CPU lowering of that copies
the first result into it, a [rows, out] copy in the forward (and Inductor fuses ``mm + add`` back
into such an ``addmm`` when the sum is written out of place). As an op, the pair is opaque to
both: its body is the eager one, so compiled and eager forwards do the same work. Its gradient
is plain products, which compiled code traces and Inductor fuses with what is around them, and
the bias's column sum (``seastar::column_sum``). SAGEConv passes no bias and adds it with
``bias_add`` instead: traced, the add joins the pass of what follows (an activation), where
``addmm`` would first copy the bias into every row of the output.
Layers call it only inside compiled code (``torch.compiler.is_compiling()``); eagerly they keep
their own ``addmm_``, whose autograd also gives higher derivatives.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..direct_ops import custom_op
from ._column_sum import column_sum


def _check(a: torch.Tensor, w_a: torch.Tensor, x: torch.Tensor, w_x: torch.Tensor,
           bias: Optional[torch.Tensor]) -> None:
    if (a.dim() != 2 or x.dim() != 2 or w_a.dim() != 2 or w_x.dim() != 2 or a.shape[0] != x.shape[0]
            or a.shape[1] != w_a.shape[1] or x.shape[1] != w_x.shape[1] or w_a.shape[0] != w_x.shape[0]
            or (bias is not None and tuple(bias.shape) != (w_a.shape[0],))):
        raise ValueError(f"seastar::linear_pair: a {tuple(a.shape)}, w_a {tuple(w_a.shape)}, x {tuple(x.shape)}, "
                         f"w_x {tuple(w_x.shape)} and bias {None if bias is None else tuple(bias.shape)} do not fit "
                         "([N, A], [out, A], [N, X], [out, X], [out])")


@custom_op("seastar::linear_pair")
def linear_pair(a: torch.Tensor, w_a: torch.Tensor, x: torch.Tensor, w_x: torch.Tensor,
                bias: Optional[torch.Tensor]) -> torch.Tensor:
    """``a`` [N, A], ``w_a`` [out, A], ``x`` [N, X], ``w_x`` [out, X], ``bias`` [out] or None ->
    ``a @ w_a.T + bias + x @ w_x.T`` [N, out]."""
    _check(a, w_a, x, w_x, bias)
    out = torch.addmm(bias, a, w_a.t()) if bias is not None else torch.mm(a, w_a.t())
    return out.addmm_(x, w_x.t())


@linear_pair.register_fake
def _linear_pair_fake(a, w_a, x, w_x, bias):
    _check(a, w_a, x, w_x, bias)
    return a.new_empty((a.shape[0], w_a.shape[0]))


def _setup(ctx, inputs, output):
    a, w_a, x, w_x, bias = inputs
    ctx.has_bias = bias is not None
    ctx.save_for_backward(a, w_a, x, w_x)


def _backward(ctx, grad):
    a, w_a, x, w_x = ctx.saved_tensors
    need = ctx.needs_input_grad
    return (grad @ w_a if need[0] else None, grad.t() @ a if need[1] else None,
            grad @ w_x if need[2] else None, grad.t() @ x if need[3] else None,
            column_sum(grad) if ctx.has_bias and need[4] else None)


linear_pair.register_autograd(_backward, setup_context=_setup)
