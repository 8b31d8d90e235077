"""Vertex programs of common GNN layers, each with an independent plain-torch implementation.

A helper module for the front-end tests (not a test file). Every entry of ``MODELS`` holds

* ``program``: the layer as a Seastar vertex program;
* ``torch_fn(graph, **tensors)``: the same math written directly with ``index_add`` /
  ``scatter_reduce`` / indexing on the edge list (deliberately *not* through
  ``seastar.reference``), so that torch's own autograd gives the gradients to compare with;
* ``make_inputs(graph, seed, ...)``: seeded random tensors bound by name.

Conventions shared by both sides: an isolated vertex (no edges in the aggregated list) gets 0
from every aggregation, mean divides by max(degree, 1), and max/min split the gradient of each (vertex, feature)
evenly among the tied edges (torch.scatter_reduce's amax/amin rule).

The programs of GCN, GAT and R-GCN are also written with the C++ API in
tests/cpp/test_golden.cpp, and the two traces must print identically. So the Python source reads
attributes in the order the C++ code does: C++ names each operand before combining it, Python
evaluates left to right, and a program's extra parameters are traced first, in signature order.
"""
from __future__ import annotations

from typing import Callable, Dict, NamedTuple

import torch

import seastar as ss

F = 3        # feature width
HEADS = 2    # GAT heads
OUT = 2      # output width of the typed linear layers
ALPHA = 0.1  # APPNP teleport probability


# ---- the vertex programs -------------------------------------------------------------------

@ss.vertex_program
def gcn(v):
    return sum(e.src.h * e.w for e in v.in_edges())


@ss.vertex_program
def gat(v):
    scores = [ss.leaky_relu(e.src.el + v.er, 0.2) for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))


@ss.vertex_program
def sage_mean(v):
    return ss.mean(e.src.h for e in v.in_edges()) + v.h


@ss.vertex_program
def gin(v, eps):
    return (1 + eps) * v.h + sum(e.src.h for e in v.in_edges())


@ss.vertex_program
def appnp_step(v):
    return (1 - ALPHA) * sum(e.src.h * e.w for e in v.in_edges()) + ALPHA * v.h0


@ss.vertex_program
def rgcn(v, W, W0):
    return ss.sum(e.src.h @ W[e.type] * e.norm for e in v.in_edges()) + v.h @ W0


@ss.vertex_program
def node_typed(v, Wn):
    # weights selected by node types: the source's through e.src.type, the centre's through v.type
    return ss.sum(e.src.h @ Wn[e.src.type] for e in v.in_edges()) + v.h @ Wn[v.type]


@ss.vertex_program
def max_agg(v):
    return max(e.src.h + e.w for e in v.in_edges())


@ss.vertex_program
def min_agg(v):
    return ss.min(e.src.h * e.w for e in v.in_edges())


@ss.vertex_program
def out_edges(v):
    return ss.sum(e.dst.h * e.w for e in v.out_edges())


@ss.vertex_program
def reuse_agg(v):
    # the aggregated mean is read again by a second traversal (through e's destination) and by v
    m = ss.mean(e.src.h for e in v.in_edges())
    return ss.sum((e.src.h - m) * e.w for e in v.in_edges()) + (v.h - m)


# ---- plain-torch versions --------------------------------------------------------------------

def _ends(graph):
    ei = graph.edge_index.long()
    return ei[0], ei[1]


def _agg_sum(x: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    return x.new_zeros((n,) + x.shape[1:]).index_add(0, index, x)


def _agg_mean(x: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    deg = torch.bincount(index, minlength=n).clamp(min=1).to(x.dtype)
    return _agg_sum(x, index, n) / deg.view((-1,) + (1,) * (x.dim() - 1))


def _agg_extreme(x: torch.Tensor, index: torch.Tensor, n: int, reduce: str) -> torch.Tensor:
    """max/min per group (0 for an empty one) whose gradient torch's scatter_reduce splits evenly
    among the tied edges of each (vertex, feature)."""
    idx = index.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return x.new_zeros((n,) + x.shape[1:]).scatter_reduce(0, idx, x, reduce=reduce, include_self=False)


def _softmax(s: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    idx = index.view((-1,) + (1,) * (s.dim() - 1)).expand_as(s)
    m = s.new_zeros((n,) + s.shape[1:]).scatter_reduce(0, idx, s, reduce="amax", include_self=False).detach()
    ex = torch.exp(s - m[index])
    return ex / _agg_sum(ex, index, n)[index]


def torch_gcn(graph, h, w):
    src, dst = _ends(graph)
    return _agg_sum(h[src] * w, dst, graph.num_nodes)


def torch_gat(graph, h, el, er):
    src, dst = _ends(graph)
    s = torch.nn.functional.leaky_relu(el[src] + er[dst], 0.2)
    return _agg_sum(_softmax(s, dst, graph.num_nodes) * h[src], dst, graph.num_nodes)


def torch_sage_mean(graph, h):
    src, dst = _ends(graph)
    return _agg_mean(h[src], dst, graph.num_nodes) + h


def torch_gin(graph, h, eps):
    src, dst = _ends(graph)
    return (1 + eps) * h + _agg_sum(h[src], dst, graph.num_nodes)


def torch_appnp_step(graph, h, w, h0):
    src, dst = _ends(graph)
    return (1 - ALPHA) * _agg_sum(h[src] * w, dst, graph.num_nodes) + ALPHA * h0


def torch_rgcn(graph, h, norm, W, W0):
    src, dst = _ends(graph)
    msg = torch.einsum("ei,eio->eo", h[src], W[graph.edge_type.long()]) * norm
    return _agg_sum(msg, dst, graph.num_nodes) + h @ W0


def torch_node_typed(graph, h, Wn):
    src, dst = _ends(graph)
    nt = graph.node_type.long()
    msg = torch.einsum("ei,eio->eo", h[src], Wn[nt[src]])
    return _agg_sum(msg, dst, graph.num_nodes) + torch.einsum("ni,nio->no", h, Wn[nt])


def torch_max_agg(graph, h, w):
    src, dst = _ends(graph)
    return _agg_extreme(h[src] + w, dst, graph.num_nodes, "amax")


def torch_min_agg(graph, h, w):
    src, dst = _ends(graph)
    return _agg_extreme(h[src] * w, dst, graph.num_nodes, "amin")


def torch_out_edges(graph, h, w):
    src, dst = _ends(graph)
    return _agg_sum(h[dst] * w, src, graph.num_nodes)


def torch_reuse_agg(graph, h, w):
    src, dst = _ends(graph)
    m = _agg_mean(h[src], dst, graph.num_nodes)
    return _agg_sum((h[src] - m[dst]) * w, dst, graph.num_nodes) + (h - m)


# ---- inputs ----------------------------------------------------------------------------------

def _randn(shape, g, dtype):
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def _pair_weights(graph, g, dtype):
    """[E, 1] edge weights equal on the edges of one (u, v) pair and different otherwise, so
    max/min tie exactly on multi-edges and nowhere else."""
    src, dst = _ends(graph)
    table = _randn((graph.num_nodes * graph.num_nodes, 1), g, dtype)
    return table[src * graph.num_nodes + dst]


def _inputs(spec: Dict[str, Callable]):
    def make(graph, seed: int = 0, dtype: torch.dtype = torch.float64, ties: bool = True) -> Dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        out = {}
        for name, shape_of in spec.items():
            if shape_of == "pair":
                out[name] = _pair_weights(graph, g, dtype) if ties else _randn((graph.num_edges, 1), g, dtype)
            else:
                out[name] = _randn(shape_of(graph), g, dtype)
        return out
    return make


class Model(NamedTuple):
    name: str
    program: "ss.VertexProgram"
    torch_fn: Callable
    make_inputs: Callable
    typed: bool = False  # needs a graph with edge and node types

    def __repr__(self) -> str:
        return self.name


def _vertex(*shape):  # a per-vertex tensor [N, *shape]
    return lambda g: (g.num_nodes,) + shape


def _edge(*shape):  # a per-edge tensor [E, *shape]
    return lambda g: (g.num_edges,) + shape


def _param(*shape):
    return lambda g: shape


MODELS: Dict[str, Model] = {m.name: m for m in [
    Model("gcn", gcn, torch_gcn, _inputs({"h": _vertex(F), "w": _edge(1)})),
    Model("gat", gat, torch_gat, _inputs({"h": _vertex(HEADS, F), "el": _vertex(HEADS, 1), "er": _vertex(HEADS, 1)})),
    Model("sage_mean", sage_mean, torch_sage_mean, _inputs({"h": _vertex(F)})),
    Model("gin", gin, torch_gin, _inputs({"h": _vertex(F), "eps": _param()})),
    Model("appnp_step", appnp_step, torch_appnp_step, _inputs({"h": _vertex(F), "w": _edge(1), "h0": _vertex(F)})),
    Model("rgcn", rgcn, torch_rgcn,
          _inputs({"h": _vertex(F), "norm": _edge(1), "W": lambda g: (g.num_edge_types, F, OUT), "W0": _param(F, OUT)}),
          typed=True),
    Model("node_typed", node_typed, torch_node_typed,
          _inputs({"h": _vertex(F), "Wn": lambda g: (g.num_node_types, F, OUT)}), typed=True),
    Model("max_agg", max_agg, torch_max_agg, _inputs({"h": _vertex(F), "w": "pair"})),
    Model("min_agg", min_agg, torch_min_agg, _inputs({"h": _vertex(F), "w": "pair"})),
    Model("out_edges", out_edges, torch_out_edges, _inputs({"h": _vertex(F), "w": _edge(1)})),
    Model("reuse_agg", reuse_agg, torch_reuse_agg, _inputs({"h": _vertex(F), "w": _edge(1)})),
]}


def check_against_torch(model, graph, dtype=torch.float64, tol=1e-10, seed=0, inputs=None, program=None):
    """Runs ``program`` (default: the model's own) on the fused backend and checks the output and
    the gradient of every input against the model's plain-torch version in float64; returns the output."""
    program = program or model.program
    inputs = inputs or model.make_inputs(graph, seed=seed, dtype=dtype, ties=True)
    inputs = {k: t.detach().requires_grad_() for k, t in inputs.items()}
    out = program(graph, backend="fused", **inputs)
    ref_inputs = {k: t.detach().to(torch.float64).requires_grad_() for k, t in inputs.items()}
    ref = model.torch_fn(graph, **ref_inputs)
    torch.testing.assert_close(out.to(torch.float64), ref, rtol=tol, atol=tol)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(seed + 7), dtype=torch.float64)
    got = torch.autograd.grad((out * weight.to(dtype)).sum(), list(inputs.values()), allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), list(ref_inputs.values()), allow_unused=True)
    for k, g, e in zip(inputs, got, exp):
        g = torch.zeros_like(inputs[k]) if g is None else g
        e = torch.zeros_like(ref_inputs[k]) if e is None else e
        torch.testing.assert_close(g.to(torch.float64), e, rtol=tol, atol=tol, msg=lambda m: f"d/d{k}: {m}")
    return out
