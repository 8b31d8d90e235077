"""Autograd keeps only the inputs a program's backward kernels read: a linear program (APPNP's
step, GCN's propagation) keeps none of its features, so K APPNP steps keep no K copies of
[N, F]; the gradients are still exact (and typed by the incoming gradient when no input is
read)."""
from __future__ import annotations

import torch

import seastar as ss


def _saved_storages(fn):
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, seen


@ss.vertex_program(name="saved_linear_sum")
def linear_sum(v):
    return ss.sum(e.src.h * 2.0 for e in v.in_edges())


def test_a_linear_program_keeps_no_input(graph_factory):
    g = graph_factory("mixed")
    h = torch.randn(g.num_nodes, 5, dtype=torch.float64, requires_grad=True)
    out, saved = _saved_storages(lambda: linear_sum(g, backend="fused", h=h))
    assert h.untyped_storage().data_ptr() not in saved
    (grad,) = torch.autograd.grad(out.sum(), [h])
    assert grad.dtype == torch.float64  # from the incoming gradient: no input is read
    src, dst = g.edge_index.long()
    want = torch.zeros_like(h).index_add(0, src, torch.full((src.numel(), 5), 2.0, dtype=torch.float64))
    torch.testing.assert_close(grad, want, rtol=1e-12, atol=1e-12)


def test_appnp_keeps_no_step_outputs(graph_factory):
    g = graph_factory("hub")
    x = torch.randn(g.num_nodes, 8, dtype=torch.float64, requires_grad=True)
    kept = {}
    for k in (1, 10):
        prop = ss.nn.APPNP(K=k, alpha=0.1).double()
        out, saved = _saved_storages(lambda: prop(g, x))
        kept[k] = sum(t.untyped_storage().nbytes() for t in saved.values())
        # the gradient still equals plain torch's K-step recurrence
        ref_x = x.detach().clone().requires_grad_()
        src, dst = g.edge_index.long()
        loops = torch.arange(g.num_nodes)
        has_loop = torch.zeros(g.num_nodes, dtype=torch.bool)
        has_loop[src[src == dst]] = True
        s2 = torch.cat([src, loops[~has_loop]])
        d2 = torch.cat([dst, loops[~has_loop]])
        deg = torch.zeros(g.num_nodes, dtype=torch.float64).index_add(0, d2, torch.ones(d2.numel(), dtype=torch.float64))
        w = (deg[s2] * deg[d2]).rsqrt().unsqueeze(-1)
        h = ref_x
        for _ in range(k):
            h = 0.9 * torch.zeros_like(h).index_add(0, d2, w * h[s2]) + 0.1 * ref_x
        torch.testing.assert_close(out, h, rtol=1e-10, atol=1e-10)
        (g_ours,) = torch.autograd.grad((out * out).sum(), [x])
        (g_ref,) = torch.autograd.grad((h * h).sum(), [ref_x])
        torch.testing.assert_close(g_ours, g_ref, rtol=1e-10, atol=1e-10)
    assert kept[10] == kept[1], kept  # independent of K: no step output is kept
