"""GATConv computes ``x W`` again in backward instead of keeping it from forward
(``seastar/nn/_recompute.py``): the projection is not kept alive between forward and backward,
gradients are those of the kept path (float64, a graph with an isolated vertex, self loops,
repeated edges and a hub), a second backward of a retained graph repeats them, and an input
modified in place before backward is refused."""
from __future__ import annotations

import weakref

import pytest
import torch

import seastar as ss
from seastar.nn import _recompute


def _graph():
    hub = [(s, 0) for s in range(1, 9)]
    rest = [(2, 3), (2, 3), (4, 4), (5, 6), (6, 5), (0, 7), (7, 1)]  # repeats, a self loop; 9 isolated
    ei = torch.tensor(hub + rest).t()
    return ss.Graph.from_edge_index(ei, num_nodes=10)


def _conv(recompute: bool, heads: int = 3, seed: int = 0):
    torch.manual_seed(seed)
    conv = ss.nn.GATConv(5, 4, heads=heads).double()
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    conv.recompute_projection = recompute
    return conv


def _grads(conv, g, x, retain=False):
    out = conv(g, x)
    w = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    params = [x] + list(conv.parameters())
    return out, torch.autograd.grad((out * w).sum(), params, retain_graph=retain)


@pytest.mark.parametrize("heads", [1, 3])
def test_gradients_match_the_path_that_keeps_the_projection(heads):
    g = _graph()
    x = torch.randn(10, 5, dtype=torch.float64, requires_grad=True)
    out_kept, grads_kept = _grads(_conv(False, heads), g, x)
    out_again, grads_again = _grads(_conv(True, heads), g, x)
    torch.testing.assert_close(out_again, out_kept, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads_again, grads_kept):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("recompute", [False, True])
def test_the_projection_is_freed_after_forward_only_when_recomputed(recompute, monkeypatch):
    g, conv = _graph(), _conv(recompute)
    projections, again = [], []
    conv.lin.register_forward_hook(lambda m, i, out: projections.append(weakref.ref(out)))
    linear = _recompute.linear
    monkeypatch.setattr(_recompute, "linear", lambda *a: again.append(1) or linear(*a))
    out = conv(g, torch.randn(10, 5, dtype=torch.float64))
    assert len(projections) == 1
    assert (projections[0]() is None) == recompute
    out.sum().backward()
    assert len(again) == (1 if recompute else 0)  # once, shared by both backward nodes
    assert conv.lin.weight.grad is not None


def test_a_retained_graph_gives_the_same_gradients_twice():
    g, conv = _graph(), _conv(True)
    x = torch.randn(10, 5, dtype=torch.float64, requires_grad=True)
    out = conv(g, x)
    first = torch.autograd.grad(out.square().sum(), [x, conv.lin.weight, conv.att_src], retain_graph=True)
    second = torch.autograd.grad(out.square().sum(), [x, conv.lin.weight, conv.att_src])
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_projection_input_modified_before_backward_is_refused():
    g, conv = _graph(), _conv(True)
    x = torch.randn(10, 5, dtype=torch.float64, requires_grad=True) * 1.0  # not a leaf: may change in place
    conv.lin.weight.requires_grad_(False)  # lin's own backward then keeps its weight, not x
    out = conv(g, x)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_without_gradients_nothing_is_recomputed():
    g, conv = _graph(), _conv(True)
    calls = []
    conv.lin.register_forward_hook(lambda m, i, out: calls.append(1))
    with torch.no_grad():
        conv(g, torch.randn(10, 5, dtype=torch.float64))
    assert calls == [1]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_parameters_recompute_from_the_float32_copies(dtype):
    """Half-precision layers compute in float32 on copies of their parameters that the module
    holds only during forward; backward recomputes from those copies, not from the module."""
    g = _graph()
    x = torch.randn(10, 5, dtype=dtype, requires_grad=True)
    results = []
    for recompute in (False, True):
        conv = _conv(recompute).to(dtype)
        out = conv(g, x)
        results.append((out, torch.autograd.grad(out.float().square().sum(), [x, conv.lin.weight, conv.att_dst])))
    (out_kept, grads_kept), (out_again, grads_again) = results
    assert out_again.dtype == dtype
    torch.testing.assert_close(out_again, out_kept, rtol=0, atol=0)
    for a, b in zip(grads_again, grads_kept):
        assert a.dtype == dtype
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_other_tensors_saved_alongside_are_still_version_checked():
    """Under saved-tensor hooks autograd checks no versions; the hooks check those they keep."""
    g, conv = _graph(), _conv(True)
    x = torch.randn(10, 5, dtype=torch.float64, requires_grad=True)
    conv.lin.weight.requires_grad_(False)
    recompute = _recompute.recomputed_projection(conv.lin, x, conv.lin(x))
    other = torch.randn(10, 3, dtype=torch.float64, requires_grad=True) * 1.0
    with recompute:
        y = other * other  # saves `other` through the hooks
    other.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
