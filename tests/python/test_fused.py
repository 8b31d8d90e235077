"""The fused CPU path against independent plain-torch implementations.

Every model of models.py runs through generated kernels (backend="fused") on every tricky graph:
forward and every gradient must match the plain-torch version to 1e-10 in float64 and to 1e-5
(relative) in float32. Also: feature widths 1/7/64 and 1/3 heads, gradcheck, softmax with
logits of +-1e4, bitwise determinism, dumps, the disk cache and the clear errors of the path.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import seastar as ss
from models import MODELS

def _grad_inputs(model, inputs):
    return {k: t.requires_grad_() for k, t in inputs.items()}


def _compare(model, graph, dtype, rtol, atol, seed=0):
    inputs = _grad_inputs(model, model.make_inputs(graph, seed=seed, dtype=dtype, ties=True))
    out = model.program(graph, backend="fused", **inputs)
    ref_inputs = {k: t.detach().to(torch.float64).requires_grad_(t.requires_grad) for k, t in inputs.items()}
    ref = model.torch_fn(graph, **ref_inputs)
    torch.testing.assert_close(out.to(torch.float64), ref, rtol=rtol, atol=atol)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(seed + 7), dtype=torch.float64)
    wanted = [k for k, t in inputs.items() if t.requires_grad]
    got = torch.autograd.grad((out * weight.to(dtype)).sum(), [inputs[k] for k in wanted], allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), [ref_inputs[k] for k in wanted], allow_unused=True)
    for k, g, e in zip(wanted, got, exp):
        g = torch.zeros_like(inputs[k]) if g is None else g
        e = torch.zeros_like(ref_inputs[k]) if e is None else e
        torch.testing.assert_close(g.to(torch.float64), e, rtol=rtol, atol=atol, msg=lambda m: f"d/d{k}: {m}")


@pytest.mark.parametrize("model", list(MODELS.values()), ids=list(MODELS))
def test_fused_matches_plain_torch_float64(model, tricky_graph):
    if model.typed and not tricky_graph.graph.has_edge_types:
        pytest.skip("typed model on an untyped graph")
    _compare(model, tricky_graph.graph, torch.float64, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("model", list(MODELS.values()), ids=list(MODELS))
def test_fused_matches_plain_torch_float32(model, tricky_graph):
    if model.typed and not tricky_graph.graph.has_edge_types:
        pytest.skip("typed model on an untyped graph")
    _compare(model, tricky_graph.graph, torch.float32, rtol=1e-5, atol=1e-5)


def _gat_inputs(n, heads, f, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"h": torch.randn(n, heads, f, generator=g, dtype=dtype).requires_grad_(),
            "el": torch.randn(n, heads, 1, generator=g, dtype=dtype).requires_grad_(),
            "er": torch.randn(n, heads, 1, generator=g, dtype=dtype).requires_grad_()}


@pytest.mark.parametrize("f", [1, 7, 64])
@pytest.mark.parametrize("heads", [1, 3])
def test_gat_widths_and_heads(graph_factory, f, heads):
    graph = graph_factory("hub")
    inputs = _gat_inputs(graph.num_nodes, heads, f)
    out = MODELS["gat"].program(graph, backend="fused", **inputs)
    ref = MODELS["gat"].torch_fn(graph, **inputs)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    g1 = torch.autograd.grad(out.square().sum(), list(inputs.values()))
    g2 = torch.autograd.grad(ref.square().sum(), list(inputs.values()))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("f", [1, 7, 64])
def test_gcn_widths(graph_factory, f):
    graph = graph_factory("mixed")
    g = torch.Generator().manual_seed(1)
    h = torch.randn(graph.num_nodes, f, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(graph.num_edges, 1, generator=g, dtype=torch.float64, requires_grad=True)
    out = MODELS["gcn"].program(graph, backend="fused", h=h, w=w)
    torch.testing.assert_close(out, MODELS["gcn"].torch_fn(graph, h=h, w=w), rtol=1e-10, atol=1e-10)


def test_gradcheck_fused(small_graph):
    graph = small_graph.graph
    inputs = _gat_inputs(graph.num_nodes, 2, 3)
    names = list(inputs)
    fn = lambda *ts: MODELS["gat"].program(graph, backend="fused", **dict(zip(names, ts)))  # noqa: E731
    assert torch.autograd.gradcheck(fn, tuple(inputs.values()))
    g = torch.Generator().manual_seed(3)
    h = torch.randn(graph.num_nodes, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(graph.num_edges, 1, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda h, w: MODELS["gcn"].program(graph, backend="fused", h=h, w=w), (h, w))


def test_softmax_finite_for_huge_logits(graph_factory):
    graph = graph_factory("hub")
    inputs = _gat_inputs(graph.num_nodes, 2, 4, dtype=torch.float32)
    with torch.no_grad():
        inputs["el"].copy_(torch.sign(inputs["el"]) * 1e4)
        inputs["er"].copy_(torch.sign(inputs["er"]) * 1e4)
    out = MODELS["gat"].program(graph, backend="fused", **inputs)
    assert torch.isfinite(out).all()
    grads = torch.autograd.grad(out.sum(), list(inputs.values()))
    assert all(torch.isfinite(g).all() for g in grads)


def test_bitwise_deterministic(graph_factory):
    graph = graph_factory("hub")
    inputs = _gat_inputs(graph.num_nodes, 3, 16, dtype=torch.float32)
    runs = []
    for _ in range(3):
        out = MODELS["gat"].program(graph, backend="fused", **inputs)
        runs.append((out,) + torch.autograd.grad(out.sum(), list(inputs.values())))
    for later in runs[1:]:
        for a, b in zip(runs[0], later):
            assert torch.equal(a, b)


def test_double_backward_is_refused(small_graph):
    graph = small_graph.graph
    inputs = _gat_inputs(graph.num_nodes, 1, 2)
    out = MODELS["gat"].program(graph, backend="fused", **inputs)
    # raised inside torch's autograd engine, which re-raises C++ errors as RuntimeError
    with pytest.raises((NotImplementedError, RuntimeError), match="double backward"):
        torch.autograd.grad(out.sum(), [inputs["h"]], create_graph=True)


def test_param_gradients_are_deterministic(small_graph):
    """Parameter gradients are summed over fixed blocks in a fixed order: bitwise equal run to run."""
    model = MODELS["rgcn"]
    inputs = {k: t.float().requires_grad_() for k, t in model.make_inputs(small_graph.graph).items()}
    grads = []
    for threads in (1, 2, 1):
        torch.set_num_threads(threads)
        out = model.program(small_graph.graph, backend="fused", **inputs)
        grads.append(torch.autograd.grad(out.square().sum(), [inputs["W"], inputs["W0"]]))
    for later in grads[1:]:
        for a, b in zip(grads[0], later):
            assert torch.equal(a, b)


@ss.vertex_program
def _neighbour_sum(v):
    return ss.sum(e.src.h for e in v.in_edges())


def test_kernel_pool_counts_the_jobs_it_offers_to_helpers():
    """At 2 threads a kernel with many blocks is offered to the pool's helpers (or, if they have
    lately lost, run on its caller alone: ``benched``); at 1 thread it never is."""
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 20000, (2, 200000), generator=gen)
    g = ss.Graph.from_edge_index(ei, num_nodes=20000)
    h = torch.randn(20000, 16, generator=gen)
    threads = torch.get_num_threads()
    try:
        counts = []
        for t in (1, 2):
            torch.set_num_threads(t)
            before = ss.kernel_pool_stats()
            expected = torch.zeros(20000, 16).index_add_(0, ei[1], h[ei[0]])
            torch.testing.assert_close(_neighbour_sum(g, backend="fused", h=h), expected)
            after = ss.kernel_pool_stats()
            counts.append({k: after[k] - before[k] for k in after})
    finally:
        torch.set_num_threads(threads)
    assert counts[0] == {"pooled": 0, "lost": 0, "benched": 0}
    assert counts[1]["pooled"] + counts[1]["benched"] >= 1
    assert 0 <= counts[1]["lost"] <= counts[1]["pooled"]


def test_wrong_inputs_are_clear_errors(small_graph):
    graph = small_graph.graph
    inputs = _gat_inputs(graph.num_nodes, 1, 2)
    with pytest.raises(ValueError, match="'h' has 3 rows"):
        MODELS["gat"].program(graph, backend="fused", **dict(inputs, h=inputs["h"][:3]))
    with pytest.raises(TypeError, match="mix"):
        MODELS["gat"].program(graph, backend="fused", **dict(inputs, h=inputs["h"].float()))


def test_dump_dir_and_disk_cache(tmp_path):
    """A fresh process with SEASTAR_DUMP_DIR writes IR and source; a second one hits the cache."""
    script = (
        "import torch, seastar as ss\n"
        "g = ss.Graph.from_edge_index(torch.tensor([[0,1,2],[1,2,0]]))\n"
        "@ss.vertex_program\n"
        "def agg(v):\n"
        "    return ss.max(e.src.h * 3.5 for e in v.in_edges())\n"
        "h = torch.randn(3, 5, requires_grad=True)\n"
        "agg(g, h=h).sum().backward()\n"
    )
    env = dict(os.environ, SEASTAR_DUMP_DIR=str(tmp_path / "dump"), SEASTAR_CACHE_DIR=str(tmp_path / "cache"),
               SEASTAR_LOG_LEVEL="info", PYTHONPATH=os.pathsep.join(sys.path))
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("compiling") == 2  # forward and backward
    dumped = sorted(p.name for p in (tmp_path / "dump").iterdir())
    for stage in ("0-traced.gir", "1-forward.gir", "3-backward.gir", "4-fused-forward.gir", "forward.f32_i32.cpp",
                  "backward.f32_i32.cpp"):
        assert any(name.endswith(stage) for name in dumped), (stage, dumped)
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "compiling" not in second.stderr


def test_compiler_failure_is_a_clear_error(tmp_path):
    env = dict(os.environ, SEASTAR_CXX="false", SEASTAR_CACHE_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join(sys.path))
    script = (
        "import torch, seastar as ss\n"
        "g = ss.Graph.from_edge_index(torch.tensor([[0],[1]]))\n"
        "p = ss.vertex_program(lambda v: sum(e.src.h for e in v.in_edges()))\n"
        "p(g, h=torch.ones(2, 2))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "CompileError" in r.stderr or "does not run" in r.stderr


def test_a_fallback_says_so_once_by_default(graph_factory):
    """backend="auto" on inputs the kernels cannot take (bfloat16) runs the reference backend and
    warns once per program and reason; backend="fused" raises instead."""
    import warnings

    @ss.vertex_program(name="fallback_probe")
    def probe(v):
        return ss.sum(e.src.h for e in v.in_edges())

    g = graph_factory("mixed")
    h = torch.randn(g.num_nodes, 4).bfloat16()
    with pytest.warns(ss.FallbackWarning, match="fallback_probe runs on the reference backend.*bfloat16"):
        out = probe(g, h=h)
    src, dst = g.edge_index.long()
    want = torch.zeros(g.num_nodes, 4).index_add(0, dst, h.float()[src])
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        probe(g, h=h)  # said once
    with pytest.raises(NotImplementedError, match="bfloat16"):
        probe(g, backend="fused", h=h)



def test_the_old_import_path_seastar_fused_still_works():
    """``seastar.fused`` held the fallback's names before they moved to ``seastar.backends``;
    code that imports them from there keeps working, with the very same classes."""
    import seastar.fused as fused
    from seastar.fused import FallbackLog, FallbackWarning

    assert FallbackWarning is ss.FallbackWarning and FallbackLog is ss.FallbackLog
    assert fused.FALLBACK_MESSAGE == "runs on the reference backend"
