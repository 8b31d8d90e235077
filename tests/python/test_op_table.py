"""The op table (core/ir/ops.def) is the one source of every op's surfaces: the Python functions
``seastar.<op>``, the reference backend, the printer and the kernels. Each public elementwise op
is checked forward and backward against an independent plain-torch formula written here (not
the table's own reference expression), on the fused CPU kernels, the emulated CUDA kernels and
the reference backend, in float64, on graphs with isolated vertices, self-loops, multi-edges and
a hub; every elementwise op, internal ones included, through the reference backend."""
from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
from seastar import _C, reference

TABLE = {row["name"]: row for row in _C.op_table()}
PUBLIC = [n for n, r in TABLE.items() if r["public"]]

# name -> (independent torch function of (a[, b]), parameters to call it with, input domain)
TORCH = {
    "exp": (torch.exp, (), "any"),
    "log": (torch.log, (), "positive"),
    "sqrt": (torch.sqrt, (), "positive"),
    "rsqrt": (lambda a: 1 / torch.sqrt(a), (), "positive"),
    "abs": (torch.abs, (), "any"),
    "relu": (F.relu, (), "any"),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.2), (0.2,), "any"),
    "elu": (lambda a: F.elu(a, 0.7), (0.7,), "any"),
    "sigmoid": (torch.sigmoid, (), "any"),
    "tanh": (torch.tanh, (), "any"),
    "pow": (lambda a: a ** 3.0, (3.0,), "any"),
    "clamp": (lambda a: torch.clamp(a, -0.4, 0.6), (-0.4, 0.6), "any"),
    "softplus": (lambda a: F.softplus(a, beta=2.0, threshold=1.5), (2.0, 1.5), "any"),
    "log1p": (torch.log1p, (), "above_minus_one"),
    "expm1": (torch.expm1, (), "any"),
    "silu": (lambda a: a * torch.sigmoid(a), (), "any"),
    "maximum": (torch.maximum, (), "any"),
    "minimum": (torch.minimum, (), "any"),
}

GRAPHS = ["mixed", "hub", "isolated", "self_loops", "multi_edges"]


def _inputs(graph, domain, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(graph.num_nodes, 5, generator=g, dtype=torch.float64) * 2
    if domain == "positive":
        h = h.abs() + 0.1
    elif domain == "above_minus_one":
        h = h.abs() - 0.9
    # keep clear of kinks (relu, abs, clamp's ends, softplus's threshold) so the gradient is defined
    h = torch.where((h.abs() < 1e-3) | ((h + 0.4).abs() < 1e-3) | ((h - 0.6).abs() < 1e-3) |
                    ((2 * h - 1.5).abs() < 1e-3), h + 0.01, h)
    w = torch.rand(graph.num_edges, 1, generator=g, dtype=torch.float64) + 0.5
    k = torch.randn(graph.num_nodes, 5, generator=g, dtype=torch.float64)
    return h, w, k


def _program(name):
    fn = getattr(ss, name)
    params = TORCH[name][1]
    if TABLE[name]["arity"] == 2:
        @ss.vertex_program(name=f"table_{name}")
        def prog(v):
            return ss.sum(fn(e.src.h, v.k) * e.w for e in v.in_edges())
    else:
        @ss.vertex_program(name=f"table_{name}")
        def prog(v):
            return ss.sum(fn(e.src.h, *params) * e.w for e in v.in_edges())
    return prog


def _torch(name, graph, h, w, k):
    fn = TORCH[name][0]
    src, dst = graph.edge_index.long()
    y = fn(h[src], k[dst]) if TABLE[name]["arity"] == 2 else fn(h[src])
    return torch.zeros(graph.num_nodes, h.shape[1], dtype=h.dtype).index_add(0, dst, y * w)


def test_every_public_op_has_an_independent_check_here():
    assert sorted(TORCH) == sorted(PUBLIC)


def test_the_python_surface_is_the_table():
    for name in PUBLIC:
        fn = getattr(ss, name)
        assert fn is getattr(ss.ops, name) and name in ss.ops.__all__
        assert fn.__doc__
        sig = inspect.signature(fn)
        names = [p for p in sig.parameters][TABLE[name]["arity"]:]
        assert names == [p for p, _ in TABLE[name]["params"]], name
    assert "step" not in ss.ops.__all__ and not hasattr(ss, "elu_grad")  # internal helpers stay internal
    assert str(inspect.signature(ss.leaky_relu)) == "(x, /, negative_slope=0.01)"
    assert str(inspect.signature(ss.softplus)) == "(x, /, beta=1.0, threshold=20.0)"


@pytest.mark.parametrize("backend", ["fused", "reference", "cuda_emulated"])
@pytest.mark.parametrize("name", sorted(TORCH))
def test_public_op_forward_and_gradients(name, backend, graph_factory, monkeypatch):
    if backend == "cuda_emulated":
        monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    prog = _program(name)
    for gi, gname in enumerate(GRAPHS if backend != "cuda_emulated" else ["mixed", "hub"]):
        graph = graph_factory(gname)
        h, w, k = _inputs(graph, TORCH[name][2], seed=gi)
        ours = [t.clone().requires_grad_() for t in (h, w, k)]
        theirs = [t.clone().requires_grad_() for t in (h, w, k)]
        kwargs = dict(h=ours[0], w=ours[1])
        if TABLE[name]["arity"] == 2:
            kwargs["k"] = ours[2]
        out = prog(graph, backend="reference" if backend == "reference" else "fused", **kwargs)
        ref = _torch(name, graph, *theirs)
        torch.testing.assert_close(out, ref, rtol=1e-11, atol=1e-11)
        weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        n = 3 if TABLE[name]["arity"] == 2 else 2
        got = torch.autograd.grad((out * weight).sum(), ours[:n])
        exp = torch.autograd.grad((ref * weight).sum(), theirs[:n])
        for label, a, b in zip("hwk", got, exp):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m: f"{gname} d/d{label}: {m}")


# internal elementwise ops, which only the tracer's operators and the passes make: the reference
# backend's row against an independent formula
INTERNAL = {
    "neg": (lambda a, b, p0, p1: -a, 0, 0),
    "sign": (lambda a, b, p0, p1: torch.sign(a), 0, 0),
    "step": (lambda a, b, p0, p1: torch.where(a > 0, 1.0, p0).to(a.dtype), 0.25, 0),
    "elu_grad": (lambda a, b, p0, p1: torch.where(a > 0, torch.ones_like(a), p0 * torch.exp(a)), 0.5, 0),
    "inside": (lambda a, b, p0, p1: ((a >= p0) & (a <= p1)).to(a.dtype), -0.3, 0.3),
    "add": (lambda a, b, p0, p1: a + b, 0, 0),
    "sub": (lambda a, b, p0, p1: a - b, 0, 0),
    "mul": (lambda a, b, p0, p1: a * b, 0, 0),
    "div": (lambda a, b, p0, p1: a / b, 0, 0),
    "eq": (lambda a, b, p0, p1: (a == b).to(a.dtype), 0, 0),
    "keep_pos": (lambda a, b, p0, p1: torch.where(b > 0, a, torch.zeros_like(a)), 0, 0),
}


def test_every_elementwise_op_is_checked_somewhere():
    elementwise = {n for n, r in TABLE.items() if r["kind"] in ("Unary", "Binary")}
    assert elementwise == set(TORCH) | set(INTERNAL) | {"cast"}


@pytest.mark.parametrize("name", sorted(INTERNAL))
def test_internal_op_on_the_reference_backend(name, graph_factory):
    graph = graph_factory("mixed")
    n = graph.num_nodes
    g = torch.Generator().manual_seed(3)
    h = torch.randn(n, 4, generator=g, dtype=torch.float64)
    k = torch.where(torch.rand(n, 4, generator=g) < 0.3, h, torch.randn(n, 4, generator=g, dtype=torch.float64))
    fn, p0, p1 = INTERNAL[name]
    b = _C.Builder({"h": [n, 4], "k": [n, 4]})
    x, y = b.vertex_input("h"), b.vertex_input("k")
    out = b.binary(name, x, y) if TABLE[name]["kind"] == "Binary" else b.unary(name, x, p0, p1)
    module = b.finish([out])
    assert f"= {name} " in str(module)
    got = reference.evaluate(module, graph, {"h": h, "k": k})[0]
    torch.testing.assert_close(got, fn(h, k, p0, p1), rtol=0, atol=0)


def test_wrong_parameters_are_clear_errors(graph_factory):
    graph = graph_factory("mixed")
    h = torch.randn(graph.num_nodes, 3)

    @ss.vertex_program
    def too_many(v):
        return ss.sum(ss.leaky_relu(e.src.h, 0.1, 0.2) for e in v.in_edges())

    with pytest.raises(TypeError, match=r"leaky_relu\(x, /, negative_slope=0.01\) takes at most 1 parameters"):
        too_many(graph, h=h)

    @ss.vertex_program
    def unknown(v):
        return ss.sum(ss.elu(e.src.h, beta=2) for e in v.in_edges())

    with pytest.raises(TypeError, match="unexpected argument 'beta'"):
        unknown(graph, h=h)

    @ss.vertex_program
    def missing(v):
        return ss.sum(ss.clamp(e.src.h, 0.0) for e in v.in_edges())

    with pytest.raises(TypeError, match="needs 'max'"):
        missing(graph, h=h)

    @ss.vertex_program
    def backwards(v):
        return ss.sum(ss.clamp(e.src.h, max=-1.0, min=1.0) for e in v.in_edges())

    with pytest.raises(ss.TraceError, match=r"test_op_table.py:\d+: clamp needs min <= max"):
        backwards(graph, h=h)

    @ss.vertex_program
    def flat(v):
        return ss.sum(ss.softplus(e.src.h, beta=0) for e in v.in_edges())

    with pytest.raises(ss.TraceError, match="softplus needs beta != 0"):
        flat(graph, h=h)

    with pytest.raises(TypeError, match="works on traced values"):
        ss.log1p(torch.ones(2))
