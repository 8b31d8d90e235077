"""The row ops of compiled code (``seastar.nn._row_ops``), in float64.

``seastar::segment_matmul`` (one product per group of consecutive rows, the group sizes as data,
with or without a bias per group) against a torch loop over the groups: the output and the
gradients of ``x``, ``weight`` and ``bias``, per matrix and per head, with empty groups;
gradcheck; inside torch.compile with other sizes; bad sizes refused with the reason.
``seastar::sorted_segment_matmul`` (the same for rows grouped by a permutation) against a product
per row, with every gradient; a compiled HGT step keeps its activation, not a mask, for backward.
``seastar::gather_rows`` against ``index_select``: output, first
and second gradients, compiled."""
from __future__ import annotations

import pytest
import torch

from seastar.nn._row_ops import gather_rows, gather_rows_op, segment_matmul, sorted_segment_matmul

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


def _sorted_reference(x, types, weight, bias=None):
    """``x[i] @ weight[types[i]] (+ bias[types[i]])`` row by row."""
    out = torch.stack([x[i] @ weight[t] for i, t in enumerate(types.tolist())])
    return out if bias is None else out + bias[types]


@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("types", [[2, 0, 2, 1, 0, 2, 2], [1, 1, 1], [0, 2, 0, 2]],
                         ids=["mixed", "one_type", "empty_type"])
def test_sorted_segment_matmul_equals_a_product_per_row_with_every_gradient(types, with_bias):
    gen = torch.Generator().manual_seed(9)
    types = torch.tensor(types)
    perm = torch.argsort(types, stable=True)
    inv = torch.empty_like(perm).scatter_(0, perm, torch.arange(perm.numel()))
    counts = torch.bincount(types, minlength=3)
    x = torch.randn(types.numel(), 4, dtype=DT, generator=gen, requires_grad=True)
    w = torch.randn(3, 4, 2, dtype=DT, generator=gen, requires_grad=True)
    b = torch.randn(3, 2, dtype=DT, generator=gen, requires_grad=True) if with_bias else None
    args = (x, w) + ((b,) if with_bias else ())

    def op(x, w, b=None):
        return sorted_segment_matmul(x, perm, inv, counts, w, b)

    torch.testing.assert_close(op(*args), _sorted_reference(x, types, w, b), **TOL)
    assert torch.autograd.gradcheck(op, args)
    seed = torch.randn(types.numel(), 2, dtype=DT, generator=gen)
    got = torch.autograd.grad((op(*args) * seed).sum(), args)
    want = torch.autograd.grad((_sorted_reference(x, types, w, b) * seed).sum(), args)
    for g, wg in zip(got, want):
        torch.testing.assert_close(g, wg, **TOL)


def test_sorted_segment_matmul_refuses_an_order_of_the_wrong_length():
    x = torch.zeros(5, 3, dtype=DT)
    with pytest.raises(ValueError, match=r"seastar::sorted_segment_matmul: perm \(4,\) and inv \(5,\) must each hold "
                                         r"one index per row of x \(5 rows\)"):
        sorted_segment_matmul(x, torch.arange(4), torch.arange(5), torch.tensor([5]), torch.zeros(1, 3, 2, dtype=DT))


def test_compiled_hgt_keeps_the_activation_not_a_mask(small_graph):
    """A compiled two-layer HGT step whose second layer groups the first's activation by node
    type: backward keeps the activation (which the typed linear reads), so relu's gradient comes
    from it, and no bool mask is stored in the forward."""
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    import seastar as ss
    graph = small_graph.graph
    conv1 = ss.nn.HGTConv(5, 8, 3, 4, heads=2)
    conv2 = ss.nn.HGTConv(8, 3, 3, 4)

    def step(g, x):
        return conv2(g, torch.relu(conv1(g, x))).square().sum()

    kept = []

    def forward(gm, _):
        outputs = gm.graph.find_nodes(op="output")[0].args[0]
        kept.extend(o.meta["val"].dtype for o in outputs if isinstance(o, torch.fx.Node) and "val" in o.meta
                    and isinstance(o.meta["val"], torch.Tensor))
        return make_boxed_func(gm)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=forward, bw_compiler=lambda gm, _: make_boxed_func(gm),
                           partition_fn=min_cut_rematerialization_partition, decompositions=select_decomp_table())
    x = torch.randn(graph.num_nodes, 5)
    got = torch.compile(step, fullgraph=True, backend=backend)(graph, x)
    got.backward()
    torch.testing.assert_close(got, step(graph, x), rtol=1e-5, atol=1e-5)
    assert kept and torch.bool not in kept
