"""Forward and backward of every model in models.py against plain torch, on every tricky graph.

Forward runs the lowered forward GIR with the reference executor; gradients come from
``torch.autograd.grad`` through the program call, which runs the lowered *backward* GIR (our
autodiff), never torch's autograd over the reference ops. The oracle is the plain-torch version
of each model differentiated by torch. All in float64, compared to 1e-10. A finite-difference
``torch.autograd.gradcheck`` on a small graph guards against both sides sharing a mistake.
"""
from __future__ import annotations

import inspect

import pytest
import torch

import models
import seastar as ss

TOL = dict(rtol=1e-10, atol=1e-10)
UNTYPED = [m for m in models.MODELS.values() if not m.typed]
TYPED = [m for m in models.MODELS.values() if m.typed]


def _leaves(tensors):
    return {k: t.detach().clone().requires_grad_(True) for k, t in tensors.items()}


def _grads(out, tensors, grad_out):
    xs = list(tensors.values())
    gs = torch.autograd.grad(out, xs, grad_out, allow_unused=True)
    return {k: torch.zeros_like(x) if g is None else g for k, x, g in zip(tensors, xs, gs)}


def _check_against_torch(model, graph, seed=0):
    tensors = model.make_inputs(graph, seed=seed)
    ours_in, theirs_in = _leaves(tensors), _leaves(tensors)
    ours = model.program(graph, backend="reference", **ours_in)
    theirs = model.torch_fn(graph, **theirs_in)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, theirs, **TOL)

    grad_out = torch.randn(ours.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    g_ours = _grads(ours, ours_in, grad_out)
    g_theirs = _grads(theirs, theirs_in, grad_out)
    for name in tensors:
        torch.testing.assert_close(g_ours[name], g_theirs[name], **TOL, msg=lambda m: f"d/d{name}: {m}")


@pytest.mark.parametrize("model", UNTYPED, ids=lambda m: m.name)
def test_matches_plain_torch(model, tricky_graph):
    _check_against_torch(model, tricky_graph.graph)


@pytest.mark.parametrize("model", TYPED, ids=lambda m: m.name)
def test_typed_matches_plain_torch(model, typed_graph):
    _check_against_torch(model, typed_graph.graph)


@pytest.mark.parametrize("model", list(models.MODELS.values()), ids=lambda m: m.name)
def test_gradcheck(model, small_graph):
    """Finite differences on a small typed graph; max/min inputs without ties (not differentiable there)."""
    graph = small_graph.graph
    tensors = _leaves(model.make_inputs(graph, seed=3, ties=False))
    names = list(tensors)

    def fn(*xs):
        return model.program(graph, backend="reference", **dict(zip(names, xs)))

    assert torch.autograd.gradcheck(fn, tuple(tensors.values()), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_isolated_vertices_get_zero(graph_factory):
    graph = graph_factory("isolated")
    isolated = (graph.in_degrees() == 0) & (graph.out_degrees() == 0)
    assert isolated.sum() >= 2
    for model in (models.MODELS[n] for n in ("gcn", "gat", "max_agg", "min_agg", "out_edges")):
        out = model.program(graph, backend="reference", **model.make_inputs(graph))
        assert torch.all(out[isolated] == 0), model.name


@pytest.mark.parametrize("name", ["max_agg", "min_agg"])
def test_extreme_ties_split_evenly_among_multi_edges(name, graph_factory):
    """On multi-edges max/min tie exactly; the tied edges of a (vertex, feature) share its
    gradient evenly, as torch.scatter_reduce's amax/amin do."""
    graph = graph_factory("multi_edges")
    model = models.MODELS[name]
    tensors = _leaves(model.make_inputs(graph))
    out = model.program(graph, backend="reference", **tensors)
    (dw,) = torch.autograd.grad(out.sum(), [tensors["w"]])
    src, dst = graph.edge_index.long()
    pairs = {}
    for e in range(graph.num_edges):
        pairs.setdefault((int(src[e]), int(dst[e])), []).append(e)
    copies = [ids for ids in pairs.values() if len(ids) > 1]
    assert copies, "the graph must have multi-edges"
    for ids in copies:  # copies of one edge carry one message: equal shares, never one winner
        for e in ids[1:]:
            torch.testing.assert_close(dw[e], dw[ids[0]], rtol=0, atol=0)
    if name == "max_agg":  # d(h + w)/dw = 1: each (vertex, feature)'s shares add up to its gradient, 1
        per_vertex = torch.zeros(graph.num_nodes, *dw.shape[1:], dtype=dw.dtype).index_add(0, dst, dw)
        has_in = torch.bincount(dst, minlength=graph.num_nodes) > 0
        # (w is broadcast over the output's features, so its gradient sums theirs)
        width = out[0].numel() // dw[0].numel()
        torch.testing.assert_close(per_vertex[has_in], torch.full_like(per_vertex[has_in], float(width)),
                                   rtol=1e-12, atol=1e-12)
        assert ((dw > 0) & (dw < width)).any(), "some tie must be split"


@pytest.mark.parametrize("scale", [1e4, -1e4])
def test_softmax_stays_finite_for_huge_logits(scale, graph_factory):
    graph = graph_factory("mixed")
    model = models.MODELS["gat"]
    tensors = model.make_inputs(graph)
    tensors["el"] = tensors["el"].sign() * scale
    tensors["er"] = torch.rand(tensors["er"].shape, generator=torch.Generator().manual_seed(5),
                               dtype=torch.float64) * scale
    tensors = _leaves(tensors)
    out = model.program(graph, backend="reference", **tensors)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, model.torch_fn(graph, **{k: t.detach() for k, t in tensors.items()}), **TOL)
    grads = torch.autograd.grad(out.sum(), list(tensors.values()))
    assert all(torch.isfinite(g).all() for g in grads)


def test_only_requested_gradients_are_lowered(graph_factory):
    """Tensors without requires_grad get no backward output; the others still match torch."""
    graph = graph_factory("mixed")
    model = models.MODELS["gcn"]
    tensors = model.make_inputs(graph)
    h = tensors["h"].clone().requires_grad_(True)
    lowered = model.program.lower(graph, h=h, w=tensors["w"])
    assert list(lowered.wrt) == ["h"]
    out = model.program(graph, backend="reference", h=h, w=tensors["w"])
    (dh,) = torch.autograd.grad(out.sum(), [h])
    h2 = tensors["h"].clone().requires_grad_(True)
    (dh2,) = torch.autograd.grad(model.torch_fn(graph, h=h2, w=tensors["w"]).sum(), [h2])
    torch.testing.assert_close(dh, dh2, **TOL)


def test_backward_runs_the_lowered_gir(graph_factory, monkeypatch):
    """The gradient path evaluates the backward module (guards against a silent torch fallback)."""
    graph = graph_factory("hub")
    model = models.MODELS["gat"]
    tensors = _leaves(model.make_inputs(graph))
    calls = []
    original = ss.reference.evaluate

    def spy(module, *args, **kwargs):
        calls.append("backward" if kwargs.get("grad_outputs") is not None else "forward")
        return original(module, *args, **kwargs)

    monkeypatch.setattr(ss.reference, "evaluate", spy)
    out = model.program(graph, backend="reference", **tensors)
    torch.autograd.grad(out.sum(), list(tensors.values()))
    assert calls == ["forward", "backward"]


# ---- parameters shared by every row: their gradient is a sum over rows (sum_rows + sum_to) ----

def _agg(x, index, n):
    return x.new_zeros((n,) + x.shape[1:]).index_add(0, index, x)


def _bias(v, b):
    return sum(e.src.h * e.w for e in v.in_edges()) + b


def _edge_bias(v, b):
    return sum(e.src.h * e.w + b for e in v.in_edges())


def _vertex_scale(v, b):
    return v.h * b + sum(e.src.h for e in v.in_edges())


def _shared_matrix(v, W):
    return v.h @ W + sum(e.src.h for e in v.in_edges()) @ W


ROW_PARAM_CASES = {
    "bias": (_bias, "b", (models.F,), lambda g, s, d, h, w, b: _agg(h[s] * w, d, g.num_nodes) + b),
    "edge_bias": (_edge_bias, "b", (models.F,), lambda g, s, d, h, w, b: _agg(h[s] * w + b, d, g.num_nodes)),
    "vertex_scale": (_vertex_scale, "b", (models.F,), lambda g, s, d, h, w, b: h * b + _agg(h[s], d, g.num_nodes)),
    "shared_matrix": (_shared_matrix, "W", (models.F, models.F),
                      lambda g, s, d, h, w, W: h @ W + _agg(h[s], d, g.num_nodes) @ W),
}
@pytest.mark.parametrize("case", list(ROW_PARAM_CASES))
def test_params_broadcast_over_rows(case, graph_factory):
    fn, pname, pshape, torch_fn = ROW_PARAM_CASES[case]
    graph = graph_factory("mixed")
    src, dst = graph.edge_index.long()
    gen = torch.Generator().manual_seed(7)
    tensors = {"h": torch.randn(graph.num_nodes, models.F, generator=gen, dtype=torch.float64),
               "w": torch.randn(graph.num_edges, 1, generator=gen, dtype=torch.float64),
               pname: torch.randn(pshape, generator=gen, dtype=torch.float64)}
    if "e.w" not in inspect.getsource(fn):
        del tensors["w"]
    ours_in, theirs_in = _leaves(tensors), _leaves(tensors)
    prog = ss.vertex_program(fn, name=case)
    ours = prog(graph, backend="reference", **ours_in)
    theirs = torch_fn(graph, src, dst, theirs_in["h"], theirs_in.get("w"), theirs_in[pname])
    torch.testing.assert_close(ours, theirs, **TOL)
    grad_out = torch.randn(ours.shape, generator=gen, dtype=torch.float64)
    g_ours, g_theirs = _grads(ours, ours_in, grad_out), _grads(theirs, theirs_in, grad_out)
    for name in tensors:
        torch.testing.assert_close(g_ours[name], g_theirs[name], **TOL, msg=lambda m: f"d/d{name}: {m}")
