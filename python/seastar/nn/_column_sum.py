"""``seastar::column_sum`` and ``bias_add``: a bias's gradient, the column sum of ``[rows, F]``.

A layer's bias gradient is its output gradient summed over rows. Eagerly that is aten's
``sum(0)``, which walks the rows in memory order. Inductor's CPU code for the same reduction
gives each thread a strip of columns and walks every row of it, a strided pass over the whole
matrix that runs several times slower than aten's on wide rows (``benchmarks/bench_column_sum.py``
times both). As an op, the sum is opaque to Inductor and keeps aten's kernel.

``bias_add(out, bias)`` is ``out + bias`` whose forward stays traced (Inductor fuses it with
what follows, such as an activation) and whose bias gradient is that op. Layers use it only
inside compiled code; eagerly ``add_bias`` adds in place where it may.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..direct_ops import custom_op


def _check(x: torch.Tensor) -> None:
    if x.dim() < 1:
        raise ValueError(f"seastar::column_sum: x must have a row dimension, got shape {tuple(x.shape)}")


@custom_op("seastar::column_sum")
def column_sum(x: torch.Tensor) -> torch.Tensor:
    """``x`` [rows, ...] -> ``x.sum(0)``."""
    _check(x)
    return x.sum(0)


@column_sum.register_fake
def _column_sum_fake(x):
    _check(x)
    return x.new_empty(x.shape[1:])


def _setup(ctx, inputs, output):
    ctx.rows = inputs[0].shape[0]


def _backward(ctx, grad):
    return grad.unsqueeze(0).expand(ctx.rows, *grad.shape).contiguous()


column_sum.register_autograd(_backward, setup_context=_setup)


class _BiasAdd(torch.autograd.Function):
    @staticmethod
    def forward(out, bias):
        return out + bias

    @staticmethod
    def setup_context(ctx, inputs, output):
        out, bias = inputs
        ctx.bias_shape = bias.shape

    @staticmethod
    def backward(ctx, grad):
        grad_bias = None
        if ctx.needs_input_grad[1]:
            rows = grad.reshape(-1, *ctx.bias_shape) if len(ctx.bias_shape) else grad.reshape(-1)
            grad_bias = column_sum(rows)
        return grad, grad_bias


def bias_add(out: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """``out + bias`` (``bias`` broadcast over ``out``'s leading dimensions), its bias gradient by
    ``seastar::column_sum``."""
    if bias is None:
        return out
    if out.dim() < bias.dim() or tuple(out.shape[out.dim() - bias.dim():]) != tuple(bias.shape):
        return out + bias  # any other broadcast: torch's own rule and gradient
    return _BiasAdd.apply(out, bias)
