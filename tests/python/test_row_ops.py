"""The row ops of compiled code (``seastar.nn._row_ops``), in float64.

``seastar::segment_matmul`` (one product per group of consecutive rows, the group sizes as data,
with or without a bias per group) against a torch loop over the groups: the output and the
gradients of ``x``, ``weight`` and ``bias``, per matrix and per head, with empty groups;
gradcheck; inside torch.compile with other sizes; bad sizes refused with the reason. ``seastar::gather_rows`` against ``index_select``: output, first
and second gradients, compiled."""
from __future__ import annotations

import pytest
import torch

from seastar.nn._row_ops import gather_rows, gather_rows_op, segment_matmul

DT = torch.float64
TOL = dict(rtol=1e-12, atol=1e-12)


def _reference(x, counts, weight, bias=None):
    parts, start = [], 0
    for g, c in enumerate(counts.tolist()):
        if x.dim() == 2:
            part = x[start:start + c] @ weight[g]
        else:  # per head
            part = torch.einsum("nhd,hde->nhe", x[start:start + c], weight[g])
        parts.append(part if bias is None else part + bias[g])
        start += c
    return torch.cat(parts)


@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("heads", [None, 2], ids=["matrix", "per_head"])
@pytest.mark.parametrize("counts", [[3, 0, 5, 2], [0, 0, 7], [10], [0, 4, 0]])
def test_output_and_gradients_equal_a_loop_over_the_groups(counts, heads, with_bias):
    gen = torch.Generator().manual_seed(len(counts))
    counts = torch.tensor(counts)
    n, g = int(counts.sum()), counts.numel()
    h = () if heads is None else (heads,)
    x = torch.randn((n,) + h + (4,), dtype=DT, generator=gen)
    w = torch.randn((g,) + h + (4, 3), dtype=DT, generator=gen)
    b = torch.randn((g,) + h + (3,), dtype=DT, generator=gen)
    seed = torch.randn((n,) + h + (3,), dtype=DT, generator=gen)
    results = []
    for fn in (segment_matmul, _reference):
        xi, wi, bi = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
        out = fn(xi, counts, wi, bi if with_bias else None)
        (out * seed).sum().backward()
        results.append((out.detach(), xi.grad, wi.grad) + ((bi.grad,) if with_bias else ()))
    if with_bias:  # an empty group's bias gets a zero gradient, not none
        assert results[0][3] is not None
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("heads", [(), (2,)], ids=["matrix", "per_head"])
def test_gradcheck(heads):
    x = torch.randn((6,) + heads + (3,), dtype=DT, requires_grad=True)
    w = torch.randn((3,) + heads + (3, 2), dtype=DT, requires_grad=True)
    b = torch.randn((3,) + heads + (2,), dtype=DT, requires_grad=True)
    counts = torch.tensor([2, 0, 4])
    assert torch.autograd.gradcheck(lambda a, c: segment_matmul(a, counts, c), (x, w))
    assert torch.autograd.gradcheck(lambda a, c, d: segment_matmul(a, counts, c, d), (x, w, b))


def test_compiled_with_other_sizes_compiles_once_more_at_most():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    fn = torch.compile(lambda x, c, w, b: segment_matmul(x, c, w, b).sum(), fullgraph=True, backend="aot_eager")
    w, b = torch.randn(2, 3, 2, dtype=DT), torch.randn(2, 2, dtype=DT, requires_grad=True)
    for n in (5, 9, 12):
        c = torch.tensor([n // 3, n - n // 3])
        x = torch.randn(n, 3, dtype=DT)
        got = fn(x, c, w, b)
        want = _reference(x, c, w, b).sum()
        torch.testing.assert_close(got, want, **TOL)
        torch.testing.assert_close(torch.autograd.grad(got, b)[0], torch.autograd.grad(want, b)[0], **TOL)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 2


@pytest.mark.parametrize("counts, match", [([2, 2], "add up to the 5 rows"), ([6, -1], "non-negative"),
                                           ([5], "do not fit")])
def test_bad_group_sizes_are_refused(counts, match):
    with pytest.raises(ValueError, match=match):
        segment_matmul(torch.zeros(5, 3, dtype=DT), torch.tensor(counts), torch.zeros(2, 3, 2, dtype=DT))


def test_a_bias_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"bias \(2, 3\) do not fit"):
        segment_matmul(torch.zeros(5, 3, dtype=DT), torch.tensor([2, 3]), torch.zeros(2, 3, 2, dtype=DT),
                       torch.zeros(2, 3, dtype=DT))


def test_gather_rows_and_its_gradients_equal_index_select():
    gen = torch.Generator().manual_seed(3)
    table = torch.randn(7, 3, dtype=DT, generator=gen, requires_grad=True)
    index = torch.tensor([6, 0, 0, 3, 6, 6, 1])  # repeats: the gradient adds them
    assert torch.autograd.gradcheck(gather_rows_op, (table, index))
    assert torch.autograd.gradgradcheck(gather_rows_op, (table, index))
    compiled = torch.compile(lambda t, i: (gather_rows(t, i) ** 2).sum(), fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(table, index), table)[0]
    want = torch.autograd.grad((table.index_select(0, index) ** 2).sum(), table)[0]
    torch.testing.assert_close(got, want, **TOL)
