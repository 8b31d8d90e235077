"""Row operations compiled code calls as ops: a dense product per group of rows, and row gathers.

``seastar::segment_matmul``:

``out[rows of group g] = x[rows of group g] @ weight[g] (+ bias[g])``, the groups' sizes given
as a tensor ``counts``; per head, ``x`` [N, H, d] and ``weight`` [G, H, d, e], each head by its
own matrix. The bias is added by the product itself (``addmm``): added apart, it would take a
gather of a bias row per row and, backward, a scatter of every row's gradient into the groups.
The typed linears and the per-relation transforms group rows by node type or relation;
eagerly they split by sizes known in Python (kept by the graph), but compiled code serves graphs of
every size, so their sizes are data there. This op takes them as data, and compiled code sees only
its output's shape, ``[rows of x, columns of weight]``: symbolic like ``x``'s, whatever the groups.
Its gradients are ops of the same kind (``segment_matmul`` with the transposed weights for ``x``,
``segment_outer`` for ``weight``, ``segment_sum`` for ``bias``), so a compiled backward needs no
graph break either.

``seastar::sorted_segment_matmul``: the same product per group where a group's rows are not
adjacent but listed by a permutation (vertices grouped by node type), gathering and scattering
them inside the op (its docstring says why).

``gather_rows(table, index)``: ``table.index_select(0, index)`` inside compiled code, as the op
``seastar::gather_rows`` whose gradient is ``seastar::scatter_add_rows`` (ATen's ``index_add_``).
The typed layers gather many rows by index (vertices by type, pairs by source); the gradient of a
gather is a scatter-add, and the one Inductor generates for CPUs adds element by element, several
times slower than ATen's on those sizes. Eagerly it is ``index_select`` itself.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from ..direct_ops import custom_op


def _bounds(counts: torch.Tensor, rows: int, op: str) -> List[int]:
    sizes = [int(c) for c in counts.tolist()]
    if any(c < 0 for c in sizes) or sum(sizes) != rows:
        raise ValueError(f"seastar::{op}: the group sizes {sizes} must be non-negative and add up to the {rows} rows")
    return sizes


def _check(x: torch.Tensor, counts: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
    heads = x.dim() == 3
    if (x.dim() not in (2, 3) or weight.dim() != x.dim() + 1 or weight.shape[1:-1] != x.shape[1:]
            or counts.dim() != 1 or counts.numel() != weight.shape[0]
            or (bias is not None and bias.shape != weight.shape[:-2] + weight.shape[-1:])):
        raise ValueError(f"seastar::segment_matmul: x {tuple(x.shape)}, counts {tuple(counts.shape)}, weight "
                         f"{tuple(weight.shape)} and bias {None if bias is None else tuple(bias.shape)} do not fit "
                         f"([N, in], [G], [G, in, out], [G, out]"
                         f"{'' if heads else ' or [N, H, d], [G], [G, H, d, e], [G, H, e]'})")


def _product(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], out: torch.Tensor) -> None:
    if x.dim() == 2:
        torch.mm(x, w, out=out) if b is None else torch.addmm(b, x, w, out=out)
    else:  # heads: [n, H, d] @ [H, d, e], a product per head written into its columns of `out`
        # (strided rows are a leading dimension to BLAS; a bmm over heads would need a copy back)
        for h in range(x.shape[1]):
            torch.mm(x[:, h], w[h], out=out[:, h]) if b is None else torch.addmm(b[h], x[:, h], w[h], out=out[:, h])


@custom_op("seastar::segment_matmul")
def segment_matmul(x: torch.Tensor, counts: torch.Tensor, weight: torch.Tensor,
                   bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x`` [N, in] in groups of ``counts`` [G] rows, ``weight`` [G, in, out], ``bias`` [G, out]
    or None -> [N, out]; or ``x`` [N, H, d], ``weight`` [G, H, d, e], ``bias`` [G, H, e] or None
    -> [N, H, e]."""
    return _grouped_product(x, counts, weight, bias)


def _grouped_product(x: torch.Tensor, counts: torch.Tensor, weight: torch.Tensor,
                     bias: Optional[torch.Tensor]) -> torch.Tensor:
    """``segment_matmul``'s body, for the ops that call it from their own."""
    _check(x, counts, weight, bias)
    out = x.new_empty(x.shape[:-1] + weight.shape[-1:])
    start = 0
    for g, c in enumerate(_bounds(counts, x.shape[0], "segment_matmul")):
        if c:
            _product(x[start:start + c], weight[g], None if bias is None else bias[g], out[start:start + c])
        start += c
    return out


@segment_matmul.register_fake
def _segment_matmul_fake(x, counts, weight, bias=None):
    return x.new_empty(tuple(x.shape[:-1]) + (weight.shape[-1],))


@custom_op("seastar::segment_outer")
def segment_outer(x: torch.Tensor, grad: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``x_g^T @ grad_g`` per group (per head) -> [G, in, out] or [G, H, d, e] (zeros for an
    empty group): the weight's gradient."""
    out = x.new_zeros((counts.numel(),) + tuple(x.shape[1:]) + (grad.shape[-1],))
    start = 0
    for g, c in enumerate(_bounds(counts, x.shape[0], "segment_outer")):
        if c:
            xg, gg = x[start:start + c], grad[start:start + c]
            if x.dim() == 2:
                torch.mm(xg.t(), gg, out=out[g])
            else:
                torch.bmm(xg.permute(1, 2, 0), gg.transpose(0, 1), out=out[g])
        start += c
    return out


@segment_outer.register_fake
def _segment_outer_fake(x, grad, counts):
    return x.new_empty((counts.shape[0],) + tuple(x.shape[1:]) + (grad.shape[-1],))


@custom_op("seastar::segment_sum")
def segment_sum(grad: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The sum of each group's rows -> [G, ...] (zeros for an empty group): the bias's gradient."""
    out = grad.new_zeros((counts.numel(),) + tuple(grad.shape[1:]))
    start = 0
    for g, c in enumerate(_bounds(counts, grad.shape[0], "segment_sum")):
        if c:
            torch.sum(grad[start:start + c], 0, out=out[g])
        start += c
    return out


@segment_sum.register_fake
def _segment_sum_fake(grad, counts):
    return grad.new_empty((counts.shape[0],) + tuple(grad.shape[1:]))


def _setup_context(ctx, inputs, output):
    x, counts, weight, _ = inputs
    ctx.save_for_backward(x, counts, weight)


def _backward(ctx, grad):
    x, counts, weight = ctx.saved_tensors
    grad = grad.contiguous()
    gx = segment_matmul(grad, counts, weight.transpose(-1, -2).contiguous()) if ctx.needs_input_grad[0] else None
    gw = segment_outer(x, grad, counts) if ctx.needs_input_grad[2] else None
    if len(ctx.needs_input_grad) == 3:  # called without a bias
        return gx, None, gw
    return gx, None, gw, segment_sum(grad, counts) if ctx.needs_input_grad[3] else None


segment_matmul.register_autograd(_backward, setup_context=_setup_context)


# ---- the product per group of rows that are not adjacent --------------------------------------------

def _check_order(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor) -> None:
    n = x.shape[0]
    if perm.dim() != 1 or inv.dim() != 1 or perm.shape[0] != n or inv.shape[0] != n:
        raise ValueError(f"seastar::sorted_segment_matmul: perm {tuple(perm.shape)} and inv {tuple(inv.shape)} must "
                         f"each hold one index per row of x ({n} rows)")


@custom_op("seastar::sorted_segment_matmul")
def sorted_segment_matmul(x: torch.Tensor, perm: torch.Tensor, inv: torch.Tensor, counts: torch.Tensor,
                          weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``segment_matmul`` of the rows in the order ``perm`` (grouped: the first ``counts[0]`` of
    that order form group 0, ...), the result back in ``x``'s order (``inv``, the inverse of
    ``perm``): ``out[perm[i]] = x[perm[i]] @ weight[group of i] (+ bias)``.

    One op rather than a gather, the product and a gather back, so that backward keeps ``x``
    itself, not its sorted copy: the sorted rows are gathered again there. ``x`` is usually a
    tensor backward keeps anyway (the previous layer's activation, or features), so the copy is
    memory saved; and in compiled code, an activation that backward keeps lets its gradient be
    computed from it instead of from a mask stored in the forward (a bool tensor, whose store
    Inductor's CPU code runs far slower than ATen's comparison)."""
    _check_order(x, perm, inv)
    return _grouped_product(x.index_select(0, perm), counts, weight, bias).index_select(0, inv)


@sorted_segment_matmul.register_fake
def _sorted_segment_matmul_fake(x, perm, inv, counts, weight, bias=None):
    _check_order(x, perm, inv)
    return x.new_empty(tuple(x.shape[:-1]) + (weight.shape[-1],))


def _sorted_setup_context(ctx, inputs, output):
    x, perm, inv, counts, weight, _ = inputs
    ctx.save_for_backward(x, perm, inv, counts, weight)


def _sorted_backward(ctx, grad):
    x, perm, inv, counts, weight = ctx.saved_tensors
    need = ctx.needs_input_grad
    gs = gather_rows_op(grad.contiguous(), perm)  # the output's gradient in the sorted order
    gx = gw = gb = None
    if need[0]:
        gx = gather_rows_op(segment_matmul(gs, counts, weight.transpose(-1, -2).contiguous()), inv)
    if need[4]:
        gw = segment_outer(gather_rows_op(x, perm), gs, counts)
    if len(need) > 5 and need[5]:
        gb = segment_sum(gs, counts)
    return gx, None, None, None, gw, gb


# ---- row gathers ------------------------------------------------------------------------------------

def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table.index_select(0, index)``; inside compiled code the op (module docstring)."""
    if torch.compiler.is_compiling():
        return gather_rows_op(table, index)
    return table.index_select(0, index)


@custom_op("seastar::gather_rows")
def gather_rows_op(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table.index_select(0, index)


@gather_rows_op.register_fake
def _gather_rows_fake(table, index):
    return table.new_empty((index.shape[0],) + tuple(table.shape[1:]))


@custom_op("seastar::scatter_add_rows")
def scatter_add_rows(grad: torch.Tensor, index: torch.Tensor, num_rows: int) -> torch.Tensor:
    """``out[index[i]] += grad[i]`` into ``num_rows`` zero rows: a gather's gradient."""
    return grad.new_zeros((num_rows,) + tuple(grad.shape[1:])).index_add_(0, index, grad)


@scatter_add_rows.register_fake
def _scatter_add_rows_fake(grad, index, num_rows):
    return grad.new_empty((num_rows,) + tuple(grad.shape[1:]))


def _gather_setup(ctx, inputs, output):
    table, index = inputs
    ctx.save_for_backward(index)
    ctx.num_rows = table.shape[0]


def _gather_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    return scatter_add_rows(grad.contiguous(), index, ctx.num_rows), None


def _scatter_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _scatter_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    return gather_rows_op(grad, index), None, None


gather_rows_op.register_autograd(_gather_backward, setup_context=_gather_setup)
scatter_add_rows.register_autograd(_scatter_backward, setup_context=_scatter_setup)
sorted_segment_matmul.register_autograd(_sorted_backward, setup_context=_sorted_setup_context)
