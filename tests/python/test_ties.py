"""Gradients at ties, in both backends, against torch (float64, inputs built to tie).

The rule (core/passes/autodiff.cpp, docs/ARCHITECTURE.md): a feature-axis max splits the
gradient evenly among the tied elements (torch.amax); ``maximum``/``minimum`` give 0.5 to each
operand on a tie (torch.maximum); an aggregation max/min over edges splits it evenly among the
tied edges (torch.scatter_reduce amax/amin, which PyG's max aggregation uses).
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss

BACKENDS = ["reference", "fused"]
TOL = dict(rtol=1e-12, atol=1e-12)


def _ring(n: int = 5) -> ss.Graph:
    src = torch.arange(n)
    # a ring plus a second in-edge into every vertex, so aggregations see two candidates
    return ss.Graph.from_edge_index(torch.stack([torch.cat([src, (src + 2) % n]), torch.cat([(src + 1) % n, src])]),
                                    num_nodes=n)


def _small_ints(*shape, seed: int) -> torch.Tensor:
    """Values in {0, 1, 2}: plenty of exact ties."""
    return torch.randint(0, 3, shape, generator=torch.Generator().manual_seed(seed)).double()


def _grad(out: torch.Tensor, x: torch.Tensor, seed: int = 7) -> torch.Tensor:
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    (gx,) = torch.autograd.grad(out, [x], g)
    return gx


@pytest.mark.parametrize("backend", BACKENDS)
def test_feature_max_of_a_broadcast_row_passes_the_gradient_once(backend):
    """The issue's repro: (b * one).max(-1) equals b, so d/db is 1, not the row's width."""
    g = ss.Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)

    @ss.vertex_program
    def prog(v):
        return (v.b * v.one).max(-1)

    b = torch.randn(3, 2, 1, dtype=torch.float64, requires_grad=True)
    prog(g, backend=backend, b=b, one=torch.ones(3, 1, 4, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(b.grad, torch.ones_like(b), **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_feature_max_on_edges_splits_ties_like_amax(backend):
    graph = _ring()
    src, dst = graph.edge_index[0], graph.edge_index[1]

    @ss.vertex_program
    def prog(v):
        return sum((e.src.h + v.h).max(-1) for e in v.in_edges())

    h = _small_ints(5, 3, 4, seed=1).requires_grad_(True)
    ours = prog(graph, backend=backend, h=h)
    href = h.detach().clone().requires_grad_(True)
    theirs = torch.zeros(5, 3, dtype=torch.float64).index_add(0, dst, (href[src] + href[dst]).amax(-1))
    torch.testing.assert_close(ours, theirs, **TOL)
    torch.testing.assert_close(_grad(ours, h), _grad(theirs, href), **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_split_a_tie_in_half(backend, op):
    graph = _ring()
    fn = getattr(ss, op)

    @ss.vertex_program(name=f"tie_{op}")
    def prog(v):
        return fn(v.x, v.c) + fn(v.x, 1.0) * 3.0

    x = _small_ints(5, 2, 4, seed=2).requires_grad_(True)
    c = _small_ints(5, 2, 1, seed=3).requires_grad_(True)
    ours = prog(graph, backend=backend, x=x, c=c)
    xr, cr = (t.detach().clone().requires_grad_(True) for t in (x, c))
    tfn = getattr(torch, op)
    theirs = tfn(xr, cr) + tfn(xr, torch.tensor(1.0, dtype=torch.float64)) * 3.0
    assert bool((x == c).any()) and bool((x == 1).any()), "the inputs must tie"
    torch.testing.assert_close(ours, theirs, **TOL)
    g = torch.randn(ours.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    gx, gc = torch.autograd.grad(ours, [x, c], g)
    tx, tc = torch.autograd.grad(theirs, [xr, cr], g)
    torch.testing.assert_close(gx, tx, **TOL)
    torch.testing.assert_close(gc, tc, **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("agg", ["max", "min"])
def test_edge_aggregation_splits_a_tie_evenly_like_scatter_reduce(backend, agg):
    # every vertex d has two in-edges: ring edge (d - 1) % 5 and edge 5 + d; give both the same
    # message, so each takes half the gradient, as torch.scatter_reduce's amax/amin (and PyG's
    # max aggregation) give it
    graph = _ring()
    dst = graph.edge_index[1]
    aggregate = getattr(ss, agg)

    @ss.vertex_program(name=f"tie_agg_{agg}")
    def prog(v):
        return aggregate(e.w * 2.0 for e in v.in_edges())

    ring = torch.tensor([3.0, -1.0, 2.0, 0.5, 7.0], dtype=torch.float64)
    other = ring[(torch.arange(5) - 1) % 5]
    assert torch.equal(dst[:5], (torch.arange(5) + 1) % 5) and torch.equal(dst[5:], torch.arange(5))
    w = torch.cat([ring, other]).view(10, 1).requires_grad_(True)
    ours = prog(graph, backend=backend, w=w)
    torch.testing.assert_close(ours, (2 * other).view(5, 1), **TOL)
    (gw,) = torch.autograd.grad(ours.sum(), [w])
    expected = torch.full((10, 1), 1.0, dtype=torch.float64)
    idx = dst.view(10, 1)
    theirs = torch.zeros(5, 1, dtype=torch.float64).scatter_reduce(0, idx, w * 2.0, reduce="a" + agg,
                                                                    include_self=False)
    (tw,) = torch.autograd.grad(theirs.sum(), [w])
    torch.testing.assert_close(tw, expected, **TOL)  # torch's own rule, as stated
    torch.testing.assert_close(gw, expected, **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("agg", ["max", "min"])
def test_first_wins_is_a_named_choice(backend, agg):
    """ties="first": the tied edge with the smallest id takes the whole gradient (one index per
    row, like torch.max(dim)); the ring edge d-1 -> d has the smaller id at every vertex."""
    graph = _ring()
    aggregate = getattr(ss, agg)

    @ss.vertex_program(name=f"tie_first_{agg}")
    def prog(v):
        return aggregate((e.w * 2.0 for e in v.in_edges()), ties="first")

    ring = torch.tensor([3.0, -1.0, 2.0, 0.5, 7.0], dtype=torch.float64)
    w = torch.cat([ring, ring[(torch.arange(5) - 1) % 5]]).view(10, 1).requires_grad_(True)
    (gw,) = torch.autograd.grad(prog(graph, backend=backend, w=w).sum(), [w])
    expected = torch.cat([torch.full((5, 1), 2.0), torch.zeros(5, 1)]).double()
    torch.testing.assert_close(gw, expected, **TOL)


def test_an_unknown_tie_rule_is_refused():
    graph = _ring()

    @ss.vertex_program(name="tie_unknown")
    def prog(v):
        return ss.max((e.w for e in v.in_edges()), ties="random")

    with pytest.raises(ValueError, match="ties must be one of"):
        prog(graph, w=torch.ones(10, 1, dtype=torch.float64))
