"""Every op of the table (core/ir/ops.def) is walked: the structural ops (leaves, gathers, feature
reductions, broadcasting, parameter products, aggregations, softmax) appear in programs checked
here forward and backward against plain torch written here, in float64, on the fused CPU
kernels, the emulated CUDA kernels and the reference backend; the elementwise ops are checked in
test_op_table.py. A test reads every IR dump (SEASTAR_DUMP_DIR: the front half's passes and the
back half's steps, forward and backward) of these programs and fails naming any op of the table
that none of them reaches, so a new op without a check here is a failing test."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import seastar as ss
from seastar import _C

TABLE = {row["name"]: row for row in _C.op_table()}
ELEMENTWISE = {n for n, r in TABLE.items() if r["kind"] in ("Unary", "Binary")}  # test_op_table.py
TOL = dict(rtol=1e-10, atol=1e-10)


def _endpoints(graph):
    src, dst = graph.edge_index.long()
    return src, dst


def _scatter(values, dst, n, reduce="sum"):
    out = values.new_zeros((n,) + values.shape[1:])
    if reduce == "sum":
        return out.index_add(0, dst, values)
    idx = dst.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce(0, idx, values, reduce, include_self=False)


# --------------------------------------------------------------------------- the programs

@ss.vertex_program(name="walk_attention")
def attention(v):
    alpha = ss.softmax([ss.leaky_relu(e.src.el + v.er, 0.2) for e in v.in_edges()])
    return ss.sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))


def attention_torch(graph, h, el, er):
    src, dst = _endpoints(graph)
    n = graph.num_nodes
    s = torch.nn.functional.leaky_relu(el[src] + er[dst], 0.2)  # [E, H, 1]
    with torch.no_grad():
        mx = _scatter(s, dst, n, "amax")
    ex = torch.exp(s - mx[dst])
    alpha = ex / _scatter(ex, dst, n)[dst]
    return _scatter(alpha * h[src], dst, n)


@ss.vertex_program(name="walk_aggregations")
def aggregations(v):
    return (ss.mean(e.src.h * e.w for e in v.in_edges()) + ss.max(e.src.h for e in v.in_edges())
            - ss.min(e.src.k for e in v.in_edges()))


def aggregations_torch(graph, h, w, k):
    src, dst = _endpoints(graph)
    n = graph.num_nodes
    count = torch.bincount(dst, minlength=n).clamp(min=1).to(h.dtype).unsqueeze(-1)
    return _scatter(h[src] * w, dst, n) / count + _scatter(h[src], dst, n, "amax") - _scatter(k[src], dst, n, "amin")


@ss.vertex_program(name="walk_first_ties")
def first_ties(v):
    # ties="first" differentiates through the edge id of the extreme (agg_argmax / agg_argmin)
    return ss.max((e.src.h for e in v.in_edges()), ties="first") - ss.min((e.src.k * e.w for e in v.in_edges()),
                                                                          ties="first")


def first_ties_torch(graph, h, w, k):
    # the inputs tie only on copies of one edge, whose shares return to the same source row
    src, dst = _endpoints(graph)
    n = graph.num_nodes
    return _scatter(h[src], dst, n, "amax") - _scatter(k[src] * w, dst, n, "amin")


@ss.vertex_program(name="walk_feature_reductions")
def feature_reductions(v):
    return ss.sum((e.src.h * v.k).sum(-1, keepdim=True) * e.src.h + e.src.h.mean(-1, keepdim=True)
                  + e.src.h.max(-1, keepdim=True) for e in v.in_edges())


def feature_reductions_torch(graph, h, k):
    src, dst = _endpoints(graph)
    hs = h[src]
    y = (hs * k[dst]).sum(-1, keepdim=True) * hs + hs.mean(-1, keepdim=True) + hs.amax(-1, keepdim=True)
    return _scatter(y, dst, graph.num_nodes)


@ss.vertex_program(name="walk_parameters")
def parameters(v, W, W0):
    return ss.sum(e.src.h @ W[e.type] for e in v.in_edges()) + v.h @ W0


def parameters_torch(graph, h, W, W0):
    src, dst = _endpoints(graph)
    msg = torch.einsum("ef,efo->eo", h[src], W[graph.edge_type.long()])
    return _scatter(msg, dst, graph.num_nodes) + h @ W0


@ss.vertex_program(name="walk_leaves")
def leaves(v, Wn):
    # the edge id enters the backward of a max over edges with ties="first", in "first_ties"
    return ss.sum(e.w * e.src.h * v.in_degree * 0.5 + e.dst.h * v.out_degree for e in v.in_edges()) + v.h @ Wn[v.type]


def leaves_torch(graph, h, w, Wn):
    src, dst = _endpoints(graph)
    n = graph.num_nodes
    deg_in = torch.bincount(dst, minlength=n).to(h.dtype).unsqueeze(-1)
    deg_out = torch.bincount(src, minlength=n).to(h.dtype).unsqueeze(-1)
    msg = w * h[src] * deg_in[dst] * 0.5 + h[dst] * deg_out[dst]
    return _scatter(msg, dst, n) + torch.einsum("nf,nfo->no", h, Wn[graph.node_type.long()])


def _inputs(name, graph):
    g = torch.Generator().manual_seed(7)
    n, E = graph.num_nodes, graph.num_edges

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    if name == "attention":
        return dict(h=r(n, 2, 3), el=r(n, 2, 1), er=r(n, 2, 1))
    if name in ("aggregations", "first_ties"):
        return dict(h=r(n, 3), w=r(E, 1), k=r(n, 3))
    if name == "feature_reductions":
        return dict(h=r(n, 4), k=r(n, 4))
    if name == "parameters":
        return dict(h=r(n, 3), W=r(graph.num_edge_types, 3, 2), W0=r(3, 2))
    return dict(h=r(n, 2), w=r(E, 1), Wn=r(graph.num_node_types, 2, 2))


CATALOGUE = {
    "attention": (attention, attention_torch),
    "aggregations": (aggregations, aggregations_torch),
    "first_ties": (first_ties, first_ties_torch),
    "feature_reductions": (feature_reductions, feature_reductions_torch),
    "parameters": (parameters, parameters_torch),
    "leaves": (leaves, leaves_torch),
}
GRAPHS = ["typed_mixed", "typed_hub", "typed_no_edges"]


def _check(name, program, torch_fn, graph, backend):
    inputs = _inputs(name, graph)
    ours = {k: t.clone().requires_grad_() for k, t in inputs.items()}
    theirs = {k: t.clone().requires_grad_() for k, t in inputs.items()}
    out = program(graph, backend=backend, **ours)
    ref = torch_fn(graph, **theirs)
    torch.testing.assert_close(out, ref, **TOL)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    keys = sorted(inputs)
    got = torch.autograd.grad((out * weight).sum(), [ours[k] for k in keys], allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), [theirs[k] for k in keys], allow_unused=True)
    for k, a, b in zip(keys, got, exp):
        a = torch.zeros_like(inputs[k]) if a is None else a
        b = torch.zeros_like(inputs[k]) if b is None else b
        torch.testing.assert_close(a, b, **TOL, msg=lambda m: f"{name} d/d{k}: {m}")


@pytest.mark.parametrize("backend", ["fused", "reference", "cuda_emulated"])
@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_structural_program_matches_torch(name, backend, graph_factory, monkeypatch):
    if backend == "cuda_emulated":
        monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    for gname in GRAPHS:
        _check(name, *CATALOGUE[name], graph_factory(gname), "reference" if backend == "reference" else "fused")


def test_every_op_of_the_table_is_walked(graph_factory, monkeypatch, tmp_path):
    """The ops in every dump of these programs, plus the elementwise ops test_op_table.py
    checks, are the whole table."""
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(tmp_path))
    graph = graph_factory("typed_mixed")
    for name, (program, torch_fn) in CATALOGUE.items():
        fresh = ss.vertex_program(program.fn, name=f"{program.name}_dumped")  # traced anew, so it dumps
        _check(name, fresh, torch_fn, graph, "fused")
    seen = set()
    for f in Path(tmp_path).glob("*.gir"):
        seen |= set(re.findall(r"= ([a-z_0-9]+)[ .\n]", f.read_text()))
    assert seen, "no IR dumps were written"
    unknown = seen - set(TABLE)
    assert not unknown, f"the dumps name ops the table does not have: {sorted(unknown)}"
    missing = set(TABLE) - ELEMENTWISE - seen
    assert not missing, f"no program here reaches these ops: {sorted(missing)}"
