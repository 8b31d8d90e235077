"""Edge values a backward stores where it first computes them (codegen/save_edge_values.h) and
reads back in its later passes and its source traversal, instead of computing them again.

Attention layers written as a user writes them (GATv2, a transformer's attention with edge
features) are the programs whose backward passes share the most edge work: each must still equal
its plain-torch version in float64, forward and every gradient, on the C++ kernels and on the
CUDA kernels run through the host emulator, on a graph with a hub, multi-edges, a self-loop and
isolated vertices. The generated backward must show the stored values (its kernel comments list
them), so that a plan that stops storing them fails here rather than only in a benchmark.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from hub_graphs import hub_graph
from models import Model, _agg_sum, _ends, _inputs, _edge, _param, _softmax, _vertex, check_against_torch

H, C, D = 2, 3, 2  # heads, channels per head, edge feature width


@ss.vertex_program
def gatv2(v, att):
    scores = [(ss.leaky_relu(e.src.xl + v.xr, 0.2) * att).sum(-1, keepdim=True) for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * e.src.xl for a, e in zip(alpha, v.in_edges()))


def torch_gatv2(graph, xl, xr, att):
    src, dst = _ends(graph)
    s = (torch.nn.functional.leaky_relu(xl[src] + xr[dst], 0.2) * att).sum(-1, keepdim=True)
    return _agg_sum(_softmax(s, dst, graph.num_nodes) * xl[src], dst, graph.num_nodes)


@ss.vertex_program
def transformer(v):
    scores = [((e.src.k + e.ea) * v.q).sum(-1, keepdim=True) * C ** -0.5 for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * (e.src.val + e.ea) for a, e in zip(alpha, v.in_edges()))


def torch_transformer(graph, q, k, val, ea):
    src, dst = _ends(graph)
    s = ((k[src] + ea) * q[dst]).sum(-1, keepdim=True) * C ** -0.5
    return _agg_sum(_softmax(s, dst, graph.num_nodes) * (val[src] + ea), dst, graph.num_nodes)


LAYERS = [
    Model("gatv2", gatv2, torch_gatv2, _inputs({"xl": _vertex(H, C), "xr": _vertex(H, C), "att": _param(H, C)})),
    Model("transformer", transformer, torch_transformer,
          _inputs({"q": _vertex(H, C), "k": _vertex(H, C), "val": _vertex(H, C), "ea": _edge(H, C)})),
]


@pytest.fixture(scope="module")
def graph():
    return hub_graph(hub_degree=40, n=30)


@pytest.mark.parametrize("emulate_cuda", [False, True], ids=["cpu", "cuda_emulated"])
@pytest.mark.parametrize("layer", LAYERS, ids=lambda m: m.name)
def test_attention_equals_plain_torch(layer, emulate_cuda, graph, monkeypatch):
    if emulate_cuda:
        monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    check_against_torch(layer, graph)


@pytest.mark.parametrize("layer", LAYERS, ids=lambda m: m.name)
def test_the_backward_stores_edge_values(layer, graph):
    inputs = {k: t.requires_grad_() for k, t in layer.make_inputs(graph).items()}
    kernels = layer.program._compiled(graph, inputs).kernels
    backward = kernels.source("backward", torch.float64, "int64")
    assert "stores per edge" in backward
    # the forward's online softmax reads each score once: nothing to store
    assert "stores per edge" not in kernels.source("forward", torch.float64, "int64")
