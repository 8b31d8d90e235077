"""The CPU traversal's prefetch (codegen/cpu_emitter.cpp): an edge loop requests, some edges
ahead, every row it reads at a place its own order does not predict: the neighbour's rows and
the edge's own rows (read through the edge's original id). The dumped source shows which rows
are requested; the values stay those of plain torch in float64 on a graph whose edges are not
sorted by destination and that is long enough for the prefetch distance to cross many centres.
"""
from __future__ import annotations

import torch

import seastar as ss


@ss.vertex_program(name="prefetch_weighted_sum")
def weighted_sum(v):
    return ss.sum(e.src.h * e.w for e in v.in_edges())


@ss.vertex_program(name="prefetch_plain_sum")
def plain_sum(v):
    return ss.sum(e.src.h for e in v.in_edges())


def _traversal(source: str) -> str:
    body = source[source.index("in-edges (CSC)"):]
    return body[:body.index("\n}\n")]


def _shuffled_graph(n=300, e=4000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=gen)
    dst = torch.randint(0, n // 2, (e,), generator=gen)  # half the vertices have no in-edges
    dst[: e // 4] = 7  # a hub
    perm = torch.randperm(e, generator=gen)  # edges in no particular order
    return ss.Graph.from_edge_index(torch.stack([src, dst])[:, perm], num_nodes=n)


def test_the_edge_loop_prefetches_the_neighbour_and_the_edge_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(tmp_path))
    g = _shuffled_graph()
    h = torch.randn(g.num_nodes, 16, dtype=torch.float64)
    w = torch.rand(g.num_edges, 1, dtype=torch.float64)
    weighted_sum(g, backend="fused", h=h, w=w)
    plain_sum(g, backend="fused", h=h)

    weighted = _traversal((tmp_path / "prefetch_weighted_sum.forward.f64_i32.cpp").read_text())
    assert "const int64_t pn = nbr[j + ahead];" in weighted, weighted
    assert "const int64_t pe = eid[j + ahead];" in weighted, weighted
    requested = [line for line in weighted.splitlines() if "__builtin_prefetch" in line]
    assert len(requested) == 2 and "pn" in requested[0] and "pe" in requested[1], requested

    plain = _traversal((tmp_path / "prefetch_plain_sum.forward.f64_i32.cpp").read_text())
    assert "const int64_t pn = nbr[j + ahead];" in plain, plain
    assert "eid[j + ahead]" not in plain, plain  # no edge row read, none requested


def test_a_prefetched_weighted_sum_matches_torch():
    g = _shuffled_graph(seed=1)
    src, dst = g.edge_index.long()
    h = torch.randn(g.num_nodes, 16, dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, 1, dtype=torch.float64, requires_grad=True)
    out = weighted_sum(g, backend="fused", h=h, w=w)
    ref = torch.zeros_like(out).index_add_(0, dst, h[src] * w)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (h, w), grad)
    want = torch.autograd.grad(ref, (h, w), grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
