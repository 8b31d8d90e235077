"""The CPU kernels' intermediates (aggregation results read back by a later traversal, stored
vertex expressions) live in buffers reused across calls (runtime/cpu/scratch_pool.h). A reused
buffer holds the previous call's values, so any row a kernel failed to write would show here:
calls on graphs that grow and shrink, and calls from several threads at once, must each equal
plain torch."""
from __future__ import annotations

import threading

import torch

import seastar as ss


@ss.vertex_program(name="scratch_symmetric")
def symmetric(v):
    # d * h at the source is a stored vertex expression: an intermediate of every vertex
    return ss.sum(e.src.d * e.src.h * e.dst.d for e in v.in_edges())


@ss.vertex_program(name="scratch_max")
def neighbour_max(v):
    # its backward stores the argmax of every vertex (an integer intermediate)
    return ss.max(e.src.h * e.w for e in v.in_edges())


def _graph(n, seed):
    g = torch.Generator().manual_seed(seed)
    e = 3 * n
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, max(1, n - 2), (e,), generator=g)  # the last vertices have no in-edges
    return ss.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)


def _torch_symmetric(graph, h, d):
    src, dst = graph.edge_index.long()
    return torch.zeros_like(h).index_add(0, dst, d[src] * h[src] * d[dst])


def _torch_max(graph, h, w):
    src, dst = graph.edge_index.long()
    msg = h[src] * w
    out = torch.zeros_like(h).scatter_reduce(0, dst.view(-1, 1).expand_as(msg), msg, "amax", include_self=False)
    return out


def test_results_stay_exact_when_graph_sizes_change():
    for i, n in enumerate([400, 37, 1200, 5, 400, 900]):
        graph = _graph(n, i)
        g = torch.Generator().manual_seed(i)
        h = torch.randn(n, 8, dtype=torch.float64, generator=g).requires_grad_()
        d = torch.rand(n, 1, dtype=torch.float64, generator=g).requires_grad_()
        w = torch.rand(graph.num_edges, 1, dtype=torch.float64, generator=g).requires_grad_()
        for prog, ref_fn, inputs in ((symmetric, _torch_symmetric, dict(h=h, d=d)),
                                     (neighbour_max, _torch_max, dict(h=h, w=w))):
            out = prog(graph, backend="fused", **inputs)
            ref = ref_fn(graph, **inputs)
            torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
            got = torch.autograd.grad(out.sum(), list(inputs.values()))
            exp = torch.autograd.grad(ref.sum(), list(inputs.values()))
            for a, b in zip(got, exp):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_concurrent_calls_get_their_own_buffers():
    graphs = [_graph(n, 10 + n) for n in (300, 301, 302, 303)]
    feats = [torch.randn(g.num_nodes, 16, dtype=torch.float64) for g in graphs]
    scales = [torch.rand(g.num_nodes, 1, dtype=torch.float64) for g in graphs]
    expected = [_torch_symmetric(g, h, d) for g, h, d in zip(graphs, feats, scales)]
    symmetric(graphs[0], backend="fused", h=feats[0], d=scales[0])  # compile once, outside the threads
    errors = []

    def work(k):
        try:
            for _ in range(20):
                out = symmetric(graphs[k], backend="fused", h=feats[k], d=scales[k])
                if not torch.allclose(out, expected[k], rtol=0, atol=1e-12):
                    errors.append(k)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
