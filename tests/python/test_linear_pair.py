"""``seastar::linear_pair`` (``a @ w_a.T + bias + x @ w_x.T`` into one buffer) against plain torch,
and compiled SAGEConv, which calls it, against eager and against SAGE written in plain torch."""
from __future__ import annotations

import copy

import pytest
import torch

import seastar.nn as snn
from hub_graphs import hub_graph
from seastar.nn._linear_pair import linear_pair

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)


def _operands(bias: bool, n=9, a=5, x=3, out=4):
    g = torch.Generator().manual_seed(11)

    def r(*shape):
        return torch.randn(*shape, dtype=DT, generator=g).requires_grad_()
    return r(n, a), r(out, a), r(n, x), r(out, x), (r(out) if bias else None)


@pytest.mark.parametrize("bias", [True, False])
def test_op_matches_plain_torch_with_every_gradient(bias):
    a, w_a, x, w_x, b = _operands(bias)
    want = a @ w_a.t() + x @ w_x.t() + (b if bias else 0)
    torch.testing.assert_close(linear_pair(a, w_a, x, w_x, b), want, **TOL)
    assert torch.autograd.gradcheck(linear_pair, (a, w_a, x, w_x, b))


def test_op_gives_gradients_only_where_asked():
    a, w_a, x, w_x, b = _operands(True)
    a, x = a.detach(), x.detach()  # a first layer's rows: no gradient
    linear_pair(a, w_a, x, w_x, b).square().sum().backward()
    assert a.grad is None and x.grad is None
    assert all(p.grad is not None for p in (w_a, w_x, b))


@pytest.mark.parametrize("bad", ["rows", "a_width", "x_width", "outs", "bias", "dims"])
def test_op_refuses_operands_that_do_not_fit(bad):
    a, w_a, x, w_x, b = (t.detach() for t in _operands(True))
    if bad == "rows":
        x = x[:-1]
    elif bad == "a_width":
        w_a = w_a[:, :-1]
    elif bad == "x_width":
        w_x = w_x[:, :-1]
    elif bad == "outs":
        w_x = w_x[:-1]
    elif bad == "bias":
        b = b[:-1]
    else:
        a = a[None]
    with pytest.raises(ValueError, match="seastar::linear_pair"):
        linear_pair(a, w_a, x, w_x, b)


def _sage_in_plain_torch(conv, graph, x, aggr):
    """``lin_l(aggr_j x_j) + lin_r(x_i)`` with index_reduce (an empty neighbourhood gives 0)."""
    src, dst = graph.edge_index
    agg = torch.zeros(x.shape[0], x.shape[1], dtype=DT)
    agg = agg.index_reduce(0, dst, x[src], aggr, include_self=False)
    return agg @ conv.lin_l.weight.t() + conv.lin_l.bias + x @ conv.lin_r.weight.t()


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("aggr", ["mean", "amax"])
def test_compiled_sage_calls_the_pair_and_equals_eager_and_plain_torch(aggr):
    graph = hub_graph(hub_degree=40)
    x0 = torch.randn(graph.num_nodes, 4, dtype=DT, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    eager = snn.SAGEConv(4, 6, aggr="max" if aggr == "amax" else aggr).to(DT)  # widening: aggregate, then map
    model = copy.deepcopy(eager)
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(str(gm.graph))
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=recording)
    results = []
    for m in (compiled, eager):
        x = x0.clone().requires_grad_()
        out = m(graph, x)
        (out * torch.linspace(-1, 1, out.numel(), dtype=DT).view_as(out)).sum().backward()
        results.append((out.detach(), x.grad, [p.grad for p in m.parameters()]))
    assert graphs and all("seastar.linear_pair" in g for g in graphs)
    (out_c, gx_c, gp_c), (out_e, gx_e, gp_e) = results
    torch.testing.assert_close(out_c, out_e, **TOL)
    torch.testing.assert_close(gx_c, gx_e, **TOL)
    for c, e in zip(gp_c, gp_e):
        torch.testing.assert_close(c, e, **TOL)

    x = x0.clone().requires_grad_()
    want = _sage_in_plain_torch(eager, graph, x, aggr)
    (want * torch.linspace(-1, 1, want.numel(), dtype=DT).view_as(want)).sum().backward()
    torch.testing.assert_close(out_e, want.detach(), **TOL)
    torch.testing.assert_close(gx_e, x.grad, **TOL)
