"""SAGEConv's projecting path with both maps in one product: when ``out < in`` and the
destinations' rows are the sources' first rows (a block called with one tensor, or one graph's
``x``), ``aggr(x W_l) + b + x_dst W_r`` is computed from ``x [W_l; W_r]``. Forward and every
gradient against SAGE in plain torch, float64, eager and compiled, on blocks with isolated
destinations, repeated neighbours, a hub, no edges, and on graphs with self-loops, multi-edges,
isolated vertices and a hub; and the path is one product of ``x`` forward and one backward."""
from __future__ import annotations

import collections
import copy

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import seastar as ss
from blocks import hazard_blocks
from conftest import UNTYPED_GRAPH_NAMES, build_graph

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)
BLOCKS = hazard_blocks()


def _conv(aggr="mean", bias=True, seed=2):
    torch.manual_seed(seed)
    conv = ss.nn.SAGEConv(7, 3, aggr=aggr, bias=bias).to(DT)  # narrowing: projects first
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return conv


def _sage_in_plain_torch(conv, src, dst, x, nd, aggr):
    agg = torch.zeros(nd, x.shape[1], dtype=DT).index_add(0, dst, x[src])
    if aggr == "mean":
        agg = agg / torch.bincount(dst, minlength=nd).clamp(min=1).to(DT)[:, None]
    out = agg @ conv.lin_l.weight.t() + x[:nd] @ conv.lin_r.weight.t()
    return out if conv.lin_l.bias is None else out + conv.lin_l.bias


def _run(conv, graph, x0):
    x = x0.clone().requires_grad_()
    out = conv(graph, x)
    w = torch.randn(out.shape, dtype=DT, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad((out * w).sum(), [x] + list(conv.parameters()))
    return out.detach(), grads


def _check(conv, graph, src, dst, nd, aggr, compiled=False):
    x0 = torch.randn(graph.num_src if graph.is_bipartite else graph.num_nodes, 7, dtype=DT,
                     generator=torch.Generator().manual_seed(3))
    want_conv = copy.deepcopy(conv)
    if compiled:
        torch._dynamo.reset()
        conv = torch.compile(conv, fullgraph=True, backend="aot_eager")
    out, grads = _run(conv, graph, x0)
    x = x0.clone().requires_grad_()
    want = _sage_in_plain_torch(want_conv, src, dst, x, nd, aggr)
    w = torch.randn(want.shape, dtype=DT, generator=torch.Generator().manual_seed(1))
    want_grads = torch.autograd.grad((want * w).sum(), [x] + list(want_conv.parameters()))
    torch.testing.assert_close(out, want.detach(), **TOL)
    for g, wg in zip(grads, want_grads):
        torch.testing.assert_close(g, wg, **TOL)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("aggr, bias", [("mean", True), ("sum", False)])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_on_blocks_equals_plain_torch(case, aggr, bias, compiled):
    _, ei, ns, nd = case
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    _check(_conv(aggr, bias), block, ei[0], ei[1], nd, aggr, compiled)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("name", UNTYPED_GRAPH_NAMES)
def test_on_graphs_equals_plain_torch(name, compiled):
    graph = build_graph(name)
    src, dst = graph.edge_index
    _check(_conv(), graph, src, dst, graph.num_nodes, "mean", compiled)


class _Products(TorchDispatchMode):
    """Per row count, the operands and results of GEMMs that are ``width`` wide (or their
    transposes): which [rows, in] tensors the products read or write."""

    def __init__(self, width, row_counts):
        super().__init__()
        self.width, self.row_counts, self.rows = width, row_counts, collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.addmm_.default):
            for a in list(args) + [out]:
                if isinstance(a, torch.Tensor) and a.dim() == 2 and self.width in a.shape:
                    rows = a.shape[0] if a.shape[1] == self.width else a.shape[1]
                    if rows in self.row_counts:
                        self.rows[rows] += 1
        return out


def test_one_product_of_x_forward_and_one_for_its_gradient():
    _, ei, ns, nd = BLOCKS[0]
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    conv = _conv()
    x = torch.randn(ns, 7, dtype=DT, requires_grad=True)
    with _Products(7, (ns, nd)) as forward:
        out = conv(block, x)
    assert forward.rows == {ns: 1}  # x [W_l; W_r]; no x_dst W_r
    with _Products(7, (ns, nd)) as backward:
        out.sum().backward()
    # the weights' gradient reads x, and x's gradient is one product: no x_dst gradient to add
    assert backward.rows == {ns: 2}


def test_a_pair_of_features_keeps_separate_maps():
    """``(x_src, x_dst)`` given as a pair: x_dst need not be x_src's first rows."""
    _, ei, ns, nd = BLOCKS[0]
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    conv = _conv()
    g = torch.Generator().manual_seed(4)
    x_src, x_dst = torch.randn(ns, 7, dtype=DT, generator=g), torch.randn(nd, 7, dtype=DT, generator=g)
    out = conv(block, (x_src, x_dst))
    agg = torch.zeros(nd, 7, dtype=DT).index_add(0, ei[1], x_src[ei[0]])
    agg = agg / torch.bincount(ei[1], minlength=nd).clamp(min=1).to(DT)[:, None]
    want = agg @ conv.lin_l.weight.t() + conv.lin_l.bias + x_dst @ conv.lin_r.weight.t()
    torch.testing.assert_close(out, want.detach(), **TOL)
