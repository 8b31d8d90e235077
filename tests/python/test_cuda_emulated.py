"""The generated CUDA, *run* without a GPU: SEASTAR_CUDA_EMULATE=1 makes CPU tensors execute the
CUDA kernels through a host emulation of the CUDA subset they use (runtime/cuda/cuda_emulator.h: one
thread per CUDA thread, real barriers and warp shuffles, the same launch order, Args and block
sizes as the driver-API runtime, at most two blocks so that dynamic and grid-stride work
assignment is exercised). Forward and every gradient must match the plain-torch version.

This checks the CUDA emitter's logic (lanes splitting wide values, group reductions through
shuffles, shared-memory views, multi-pass traversals, online softmax, parameter-gradient block
sums, the work counters) and the device helpers; it cannot check what only hardware shows
(timing, memory ordering beyond the barriers, the driver API): tests/gpu/test_cuda.py does.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from models import MODELS, check_against_torch

GRAPHS = ["hub", "mixed", "no_edges", "isolated", "typed_mixed", "typed_multi_edges"]


@pytest.fixture(autouse=True)
def emulate(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("model", list(MODELS.values()), ids=list(MODELS))
def test_emulated_cuda_matches_plain_torch(model, graph_name, graph_factory):
    graph = graph_factory(graph_name)
    if model.typed and not graph.has_edge_types:
        pytest.skip("typed model on an untyped graph")
    check_against_torch(model, graph)


@pytest.mark.parametrize("heads,f", [(1, 1), (8, 1), (3, 5), (8, 8), (2, 48), (1, 300)])
def test_emulated_gat_thread_mappings(heads, f, graph_factory):
    """A lane per vertex, sub-warp groups, a warp with several elements per lane, a block per vertex."""
    graph = graph_factory("mixed")  # every emulated barrier is a host mutex: a small graph
    g = torch.Generator().manual_seed(heads * 1000 + f)
    inputs = {"h": torch.randn(graph.num_nodes, heads, f, generator=g, dtype=torch.float64),
              "el": torch.randn(graph.num_nodes, heads, 1, generator=g, dtype=torch.float64),
              "er": torch.randn(graph.num_nodes, heads, 1, generator=g, dtype=torch.float64)}
    check_against_torch(MODELS["gat"], graph, inputs=inputs)


@pytest.mark.parametrize("f", [7, 64, 1024])
def test_emulated_wide_gcn_float32(f, graph_factory):
    graph = graph_factory("mixed")
    g = torch.Generator().manual_seed(f)
    inputs = {"h": torch.randn(graph.num_nodes, f, generator=g), "w": torch.randn(graph.num_edges, 1, generator=g)}
    check_against_torch(MODELS["gcn"], graph, dtype=torch.float32, tol=1e-5, inputs=inputs)


def test_emulated_wide_typed_weights(graph_factory):
    """x @ W[e.type] with 48 x 48 weights inside the program: matvec of a split value through
    shared memory, and the weight gradient as block partial sums (wider than a warp)."""
    graph = graph_factory("typed_mixed")
    g = torch.Generator().manual_seed(5)
    F = 48
    inputs = {"h": torch.randn(graph.num_nodes, F, generator=g, dtype=torch.float64),
              "norm": torch.randn(graph.num_edges, 1, generator=g, dtype=torch.float64),
              "W": torch.randn(graph.num_edge_types, F, F, generator=g, dtype=torch.float64) / F,
              "W0": torch.randn(F, F, generator=g, dtype=torch.float64) / F}
    check_against_torch(MODELS["rgcn"], graph, inputs=inputs, tol=1e-9)


def test_emulated_softmax_huge_logits_and_determinism(graph_factory):
    graph = graph_factory("mixed")
    g = torch.Generator().manual_seed(2)
    inputs = {"h": torch.randn(graph.num_nodes, 4, 16, generator=g),
              "el": torch.sign(torch.randn(graph.num_nodes, 4, 1, generator=g)) * 1e4,
              "er": torch.sign(torch.randn(graph.num_nodes, 4, 1, generator=g)) * 1e4}
    runs = []
    for _ in range(2):
        t = {k: v.clone().requires_grad_() for k, v in inputs.items()}
        out = MODELS["gat"].program(graph, backend="fused", **t)
        runs.append((out,) + torch.autograd.grad(out.sum(), list(t.values())))
    assert all(torch.isfinite(x).all() for x in runs[0])
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_emulated_cuda_is_not_the_cpu_kernel(tmp_path, monkeypatch, graph_factory):
    """The emulated path really runs the CUDA source (its dump is the emulated translation unit)."""
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(tmp_path))

    @ss.vertex_program(name="emu_probe")
    def probe(v):
        return ss.sum(e.src.h * 2.5 for e in v.in_edges())

    graph = graph_factory("mixed")
    h = torch.randn(graph.num_nodes, 40, dtype=torch.float64)
    out = probe(graph, backend="fused", h=h)
    src, dst = graph.edge_index.long()
    torch.testing.assert_close(out, torch.zeros_like(h).index_add(0, dst, 2.5 * h[src]))
    dumped = (tmp_path / "emu_probe.forward.f64_i32_cudaemu.cpp").read_text()
    assert "seastar_bind_emulator" in dumped and "__global__" in dumped and "grp.next_base" in dumped


@pytest.mark.parametrize("name", ["max_agg", "min_agg"])
def test_emulated_extreme_gradcheck_at_ties(name, small_graph):
    """tests/gpu/test_cuda.py's gradcheck of max_agg: the multi-edges carry equal messages, so
    the finite differences see each tied edge take half, which the even split gives."""
    graph = small_graph.graph
    model = MODELS[name]
    g = torch.Generator().manual_seed(3)
    h = torch.randn(graph.num_nodes, 4, generator=g, dtype=torch.float64).requires_grad_()
    w = model.make_inputs(graph)["w"].requires_grad_()
    assert torch.autograd.gradcheck(lambda h, w: model.program(graph, backend="fused", h=h, w=w), (h, w))


@pytest.mark.parametrize("ties", ["even", "pyg"])
def test_emulated_tie_rules_on_relu_features(ties, graph_factory):
    """Post-ReLU features tie at 0 across sources: each rule against torch.scatter_reduce (from a
    start that never ties for "even", from zeros as PyG calls it for "pyg")."""
    graph = graph_factory("hub")

    @ss.vertex_program(name=f"emulated_max_{ties}")
    def prog(v):
        return ss.max((e.src.h for e in v.in_edges()), ties=ties)

    x = torch.relu(torch.randn(graph.num_nodes, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    h, hr = x.clone().requires_grad_(), x.clone().requires_grad_()
    src, dst = graph.edge_index.long()
    start = torch.zeros if ties == "pyg" else (lambda *s, **k: torch.full(s, float("-inf"), **k))
    ref = start(graph.num_nodes, 5, dtype=torch.float64).scatter_reduce(
        0, dst.view(-1, 1).expand(-1, 5), hr[src], reduce="amax", include_self=False)
    ref = torch.where(torch.isinf(ref), torch.zeros_like(ref), ref)
    out = prog(graph, backend="fused", h=h)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    gout = torch.randn(out.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    (got,), (exp,) = torch.autograd.grad(out, [h], gout), torch.autograd.grad(ref, [hr], gout)
    torch.testing.assert_close(got, exp, rtol=1e-12, atol=1e-12)
