"""Softmax and factored sums at vertices without edges: finite gradients, equal to plain torch.

simplify moves work that depends only on the centre out of the edge loop (hoist) and applies
a centre factor after the sum (factor). Both compute the moved value at every vertex, those
without edges included, where a softmax normaliser is a sum over no edges: 0, so the factor
there is inf or NaN. The factored sum must still be 0 at such a vertex, as the sum over its
edges is, and its gradient finite. Each program runs on both backends against a plain-torch
evaluation on graphs with vertices without in-edges, without out-edges, no edges at all and a
single vertex, forward and every gradient, in float64.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss

TOL = dict(rtol=1e-10, atol=1e-10)
BACKENDS = ["reference", "fused"]


def _per_dst(x: torch.Tensor, dst: torch.Tensor, n: int, reduce: str = "sum") -> torch.Tensor:
    idx = dst.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return x.new_zeros((n,) + x.shape[1:]).scatter_reduce(0, idx, x, reduce=reduce, include_self=False)


def _softmax(s: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    top = _per_dst(s.detach(), dst, n, "amax")
    ex = torch.exp(s - top[dst])
    return ex / _per_dst(ex, dst, n)[dst]


@ss.vertex_program(name="softmax_of_the_centre")
def softmax_of_the_centre(v):
    """The issue's repro: a score that depends only on the destination."""
    return ss.sum(e.src.s * a for a, e in zip(ss.softmax([e.dst.s for e in v.in_edges()]), v.in_edges()))


def torch_softmax_of_the_centre(src, dst, n, s):
    return _per_dst(s[src] * _softmax(s[dst], dst, n), dst, n)


@ss.vertex_program(name="softmax_times_degree")
def softmax_times_degree(v):
    scores = [e.dst.s * v.in_degree for e in v.in_edges()]
    return ss.sum(a * e.src.s for a, e in zip(ss.softmax(scores), v.in_edges()))


def torch_softmax_times_degree(src, dst, n, s):
    deg = torch.bincount(dst, minlength=n).to(s.dtype).view(-1, 1)
    return _per_dst(_softmax((s * deg)[dst], dst, n) * s[src], dst, n)


@ss.vertex_program(name="max_of_out_edge_softmax")
def max_of_out_edge_softmax(v):
    return ss.max(ss.softmax(x.dst.c + x.dst.a) for x in v.out_edges())


def torch_max_of_out_edge_softmax(src, dst, n, s, c, a):
    # over out-edges: the edge list reversed, the source is the centre
    return _per_dst(_softmax(c[dst] + a[dst], src, n), src, n, "amax")


@ss.vertex_program(name="softmax_in_a_weighted_sum")
def softmax_in_a_weighted_sum(v):
    alpha = ss.softmax([v.s + e.w for e in v.in_edges()])
    return ss.sum(a * (e.src.a * v.c) for a, e in zip(alpha, v.in_edges()))


def torch_softmax_in_a_weighted_sum(src, dst, n, s, w, a, c):
    return _per_dst(_softmax(s[dst] + w, dst, n) * (a[src] * c[dst]), dst, n)


PROGRAMS = {
    "softmax_of_the_centre": (softmax_of_the_centre, torch_softmax_of_the_centre, ("s",)),
    "softmax_times_degree": (softmax_times_degree, torch_softmax_times_degree, ("s",)),
    "max_of_out_edge_softmax": (max_of_out_edge_softmax, torch_max_of_out_edge_softmax, ("s", "c", "a")),
    "softmax_in_a_weighted_sum": (softmax_in_a_weighted_sum, torch_softmax_in_a_weighted_sum, ("s", "w", "a", "c")),
}

GRAPHS = {
    "three_vertices": (torch.tensor([[0, 1], [1, 2]]), 3),  # 0 has no in-edges, 2 no out-edges
    "no_edges": (torch.zeros(2, 0, dtype=torch.long), 4),
    "single_vertex": (torch.zeros(2, 0, dtype=torch.long), 1),
    "loop_and_hub": (torch.tensor([[0, 1, 2, 3, 3, 5, 1], [3, 3, 3, 3, 3, 5, 2]]), 7),  # 4, 6 isolated
}


def _inputs(names, src, n, seed):
    gen = torch.Generator().manual_seed(seed)
    rows = {"w": src.numel()}
    return {k: torch.randn(rows.get(k, n), 2, dtype=torch.float64, generator=gen).requires_grad_(True)
            for k in names}


@pytest.mark.parametrize("graph_name", sorted(GRAPHS))
@pytest.mark.parametrize("prog_name", sorted(PROGRAMS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_and_gradients_are_finite_and_match_torch(backend, prog_name, graph_name):
    edge_index, n = GRAPHS[graph_name]
    prog, torch_fn, names = PROGRAMS[prog_name]
    graph = ss.Graph.from_edge_index(edge_index, num_nodes=n)
    src, dst = edge_index[0], edge_index[1]
    ours_in = _inputs(names, src, n, seed=3)
    theirs_in = {k: t.detach().clone().requires_grad_(True) for k, t in ours_in.items()}
    ours = prog(graph, backend=backend, **ours_in)
    theirs = torch_fn(src, dst, n, **theirs_in)
    torch.testing.assert_close(ours, theirs, **TOL)
    g = torch.randn(ours.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    got = torch.autograd.grad(ours, list(ours_in.values()), g, allow_unused=True)
    want = torch.autograd.grad(theirs, list(theirs_in.values()), g, allow_unused=True)
    for name, a, b in zip(names, got, want):
        a = torch.zeros_like(ours_in[name]) if a is None else a
        b = torch.zeros_like(ours_in[name]) if b is None else b
        assert torch.isfinite(a).all(), f"d/d{name} has non-finite entries: {a}"
        torch.testing.assert_close(a, b, **TOL, msg=lambda m: f"d/d{name}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_three_vertex_case_gives_ones(backend):
    """Vertex 0 has no in-edges; its only role is the source of edge 0 -> 1, whose weight is 1."""
    graph = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    s = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    softmax_of_the_centre(graph, backend=backend, s=s).sum().backward()
    torch.testing.assert_close(s.grad[0], torch.ones(2, dtype=torch.float64), rtol=0, atol=0)
