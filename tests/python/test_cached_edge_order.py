"""GCNConv and APPNP with edge weights: GCNConv's per-vertex normalisation over the graph as
given (``seastar.nn._gcn_norm._weighted_norm``), APPNP's normalised weight per edge in
destination order (``EdgeNorm``), and with ``cached=True`` the graph and weights kept with the
edges in destination order (``in_destination_order``), so the kernels read the weights as a
stream. Checked on every
tricky graph (isolated vertices, self loops, several loops at a vertex, multi-edges, a hub, no
edges), both backends, float64: forward and every gradient against plain torch implementing
PyG's rules; the cached and uncached layers equal (the fused kernels' forward bit for bit: each
vertex adds its in-edges in the same order); the kept graph in destination order; not reordered
where that would change results (edge dropout masks drawn in the caller's order, learned
weights)."""
from __future__ import annotations

import copy

import pytest
import torch

import seastar as ss
import seastar.nn as snn

from conftest import fused_available

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)
BACKENDS = ["reference", "fused"]
F_IN, F_OUT = 5, 3


def scatter_sum(x, index, n):
    return x.new_zeros((n,) + x.shape[1:]).index_add(0, index, x)


def pyg_weighted_loops(ei, w, n, fill=1.0):
    """PyG's ``add_remaining_self_loops`` with weights: the non-loop edges, then one loop per
    vertex weighted ``fill``, or by the vertex's own loop (index assignment, as PyG)."""
    is_loop = ei[0] == ei[1]
    loop_w = torch.full((n,), fill, dtype=w.dtype)
    loop_w[ei[0, is_loop]] = w[is_loop]
    loops = torch.arange(n)
    return torch.cat([ei[:, ~is_loop], torch.stack([loops, loops])], 1), torch.cat([w[~is_loop], loop_w])


def gcn_normalised(ei, w, n):
    deg = scatter_sum(w, ei[1], n)
    dinv = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    return dinv[ei[0]] * w * dinv[ei[1]]


def ref_gcn(ei, w, n, x, layer):
    ei, w = pyg_weighted_loops(ei, w, n)
    h = x @ layer.lin.weight.t()
    return scatter_sum(h[ei[0]] * gcn_normalised(ei, w, n)[:, None], ei[1], n) + layer.bias


def ref_appnp(ei, w, n, x, K, alpha):
    ei, w = pyg_weighted_loops(ei, w, n)
    wn = gcn_normalised(ei, w, n)[:, None]
    h = x
    for _ in range(K):
        h = (1 - alpha) * scatter_sum(wn * h[ei[0]], ei[1], n) + alpha * x
    return h


def in_destination_order(structure) -> bool:
    eid = structure.graph.tensors()["in_eid"].long()
    return torch.equal(eid, torch.arange(eid.numel()))


def same_order(got, want, backend):
    """The fused kernels walk each vertex's in-edges in the same order on both graphs: equal bit
    for bit. The reference backend adds in edge-id order, which on a typed graph's destination
    order (by type within a vertex) is another order."""
    if backend == "fused":
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, **TOL)


def skip_without_fused(backend):
    if backend == "fused" and not fused_available():
        pytest.skip("no fused backend in this build")


def inputs(g, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_nodes, F_IN, dtype=DT, generator=gen)
    w = torch.rand(g.num_edges, dtype=DT, generator=gen) + 0.1
    return x, w


def grads(out, leaves, seed=1):
    gout = torch.randn(out.shape, dtype=DT, generator=torch.Generator().manual_seed(seed))
    return torch.autograd.grad(out, leaves, gout)


@pytest.mark.parametrize("pyg_call", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_cached_weighted_gcn(tricky_graph, backend, pyg_call):
    skip_without_fused(backend)
    g = tricky_graph.graph
    ei, n = g.edge_index.long(), g.num_nodes
    x, w = inputs(g)
    torch.manual_seed(0)
    layer = snn.GCNConv(F_IN, F_OUT, cached=True, backend=backend).to(DT)
    with torch.no_grad():
        layer.bias.uniform_(-1, 1)
    uncached = copy.deepcopy(layer)
    uncached.cached = False
    xa = x.clone().requires_grad_()
    run = (lambda m, xx: m(xx, ei, w)) if pyg_call else (lambda m, xx: m(g, xx, w))
    first, again = run(layer, xa), run(layer, xa)  # the second call reads the kept graph
    s, kept = layer._cached_edge_index
    assert in_destination_order(s) and not kept.w.requires_grad
    xb = x.clone().requires_grad_()
    want = ref_gcn(ei, w, n, xb, layer)
    torch.testing.assert_close(again, want, **TOL)
    assert torch.equal(first, again)
    same_order(again, run(uncached, x.clone().requires_grad_()), backend)
    params = [layer.lin.weight, layer.bias]
    for got, exp in zip(grads(again, [xa] + params), grads(want, [xb] + params)):
        torch.testing.assert_close(got, exp, **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cached_weighted_appnp(tricky_graph, backend):
    skip_without_fused(backend)
    g = tricky_graph.graph
    ei, n = g.edge_index.long(), g.num_nodes
    x, w = inputs(g, seed=2)
    K, alpha = 3, 0.15
    layer = snn.APPNP(K, alpha, cached=True, backend=backend)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    layer(g, xa, w)
    out = layer(g, xa, w)
    assert in_destination_order(layer._cached_edge_index[0])
    want = ref_appnp(ei, w, n, xb, K, alpha)
    torch.testing.assert_close(out, want, **TOL)
    same_order(out, snn.APPNP(K, alpha, backend=backend)(g, x.clone().requires_grad_(), w), backend)
    torch.testing.assert_close(grads(out, [xa])[0], grads(want, [xb])[0], **TOL)


def shuffled_graph():
    """Edges far from destination order, so a kept graph in the caller's order shows."""
    ei = torch.tensor([[3, 0, 2, 1, 4, 0, 2, 3], [0, 4, 1, 0, 2, 1, 4, 3]])
    return ss.Graph.from_edge_index(ei, num_nodes=5)


def test_not_reordered_where_results_would_change():
    g = shuffled_graph()
    x, w = inputs(g)
    # edge dropout draws its masks in the caller's edge order (the same draws as PyG's)
    drop = snn.APPNP(2, 0.1, dropout=0.5, cached=True).eval()
    drop(g, x, w)
    assert not in_destination_order(drop._cached_edge_index[0])
    # learned weights: their gradient flows through the kept tensor
    learned = w.clone().requires_grad_()
    gcn = snn.GCNConv(F_IN, F_OUT, cached=True).to(DT)
    gcn(g, x, learned)
    assert not in_destination_order(gcn._cached_edge_index[0])
    # without edge weights there is no per-edge tensor: the graph is the caller's
    plain = snn.GCNConv(F_IN, F_OUT, cached=True).to(DT)
    plain(g, x)
    assert plain._cached_edge_index[0].graph is g


def test_the_uncached_layer_keeps_the_caller_order():
    g = shuffled_graph()
    x, w = inputs(g)
    layer = snn.GCNConv(F_IN, F_OUT).to(DT)
    layer(g, x, w)
    assert layer._cached_edge_index is None


def test_an_unknown_normalisation_form_is_refused():
    from seastar.nn._gcn_norm import gcn_norm
    from seastar.nn._structure import Structure
    g = shuffled_graph()
    with pytest.raises(ValueError, match="form='edges'"):
        gcn_norm(Structure(g, 5, 5, None), inputs(g)[1], True, False, DT, "cpu", form="edges")
