"""``seastar::segment_matmul``: one product per group of consecutive rows, the group sizes as data
(``seastar.nn._segment``), against a torch loop over the groups in float64: the output and the
gradients of ``x`` and ``weight``, with empty groups; inside torch.compile with other sizes; bad
sizes refused with the reason."""
from __future__ import annotations

import pytest
import torch

from seastar.nn._segment import segment_matmul

DT = torch.float64
TOL = dict(rtol=1e-12, atol=1e-12)


def _reference(x, counts, weight):
    parts, start = [], 0
    for g, c in enumerate(counts.tolist()):
        parts.append(x[start:start + c] @ weight[g])
        start += c
    return torch.cat(parts)


@pytest.mark.parametrize("counts", [[3, 0, 5, 2], [0, 0, 7], [10], [0, 4, 0]])
def test_output_and_gradients_equal_a_loop_over_the_groups(counts):
    gen = torch.Generator().manual_seed(len(counts))
    counts = torch.tensor(counts)
    n, g = int(counts.sum()), counts.numel()
    x = torch.randn(n, 4, dtype=DT, generator=gen)
    w = torch.randn(g, 4, 3, dtype=DT, generator=gen)
    seed = torch.randn(n, 3, dtype=DT, generator=gen)
    results = []
    for fn in (segment_matmul, _reference):
        xi, wi = x.clone().requires_grad_(), w.clone().requires_grad_()
        out = fn(xi, counts, wi)
        (out * seed).sum().backward()
        results.append((out.detach(), xi.grad, wi.grad))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, **TOL)


def test_gradcheck():
    x = torch.randn(6, 3, dtype=DT, requires_grad=True)
    w = torch.randn(3, 3, 2, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: segment_matmul(a, torch.tensor([2, 0, 4]), b), (x, w))


def test_compiled_with_other_sizes_compiles_once_more_at_most():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    fn = torch.compile(lambda x, c, w: segment_matmul(x, c, w).sum(), fullgraph=True, backend="aot_eager")
    w = torch.randn(2, 3, 2, dtype=DT)
    for n in (5, 9, 12):
        c = torch.tensor([n // 3, n - n // 3])
        x = torch.randn(n, 3, dtype=DT)
        torch.testing.assert_close(fn(x, c, w), _reference(x, c, w).sum(), **TOL)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 2


@pytest.mark.parametrize("counts, match", [([2, 2], "add up to the 5 rows"), ([6, -1], "non-negative"),
                                           ([5], "do not fit")])
def test_bad_group_sizes_are_refused(counts, match):
    with pytest.raises(ValueError, match=match):
        segment_matmul(torch.zeros(5, 3, dtype=DT), torch.tensor(counts), torch.zeros(2, 3, 2, dtype=DT))
