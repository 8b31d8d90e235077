"""``seastar::column_sum`` (a bias's gradient, kept on aten's kernel in compiled code) and
``bias_add`` against plain torch, float64, with every gradient; and compiled layers with a bias
take their bias gradient through the op."""
from __future__ import annotations

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

import seastar as ss
from seastar.nn._column_sum import bias_add, column_sum
from seastar.nn._linear import Linear

DT = torch.float64
TOL = dict(rtol=1e-12, atol=1e-12)


def _r(*shape, seed=0):
    return torch.randn(*shape, dtype=DT, generator=torch.Generator().manual_seed(seed)).requires_grad_()


@pytest.mark.parametrize("shape", [(9, 4), (7, 2, 3), (1, 5), (0, 3), (6,)])
def test_column_sum_is_the_sum_over_rows_with_its_gradient(shape):
    x = _r(*shape)
    torch.testing.assert_close(column_sum(x), x.sum(0), **TOL)
    assert torch.autograd.gradcheck(column_sum, (x,))


def test_column_sum_refuses_a_tensor_without_rows():
    with pytest.raises(ValueError, match="seastar::column_sum: x must have a row dimension"):
        column_sum(torch.tensor(1.0))


@pytest.mark.parametrize("out_shape, bias_shape", [((9, 4), (4,)), ((5, 2, 3), (2, 3)), ((5, 2, 3), (3,)),
                                                   ((0, 4), (4,)), ((5, 4), (1,)), ((4,), (5, 4))])
def test_bias_add_is_the_sum_with_every_gradient(out_shape, bias_shape):
    out, bias = _r(*out_shape, seed=1), _r(*bias_shape, seed=2)
    torch.testing.assert_close(bias_add(out, bias), out + bias, **TOL)
    assert torch.autograd.gradcheck(bias_add, (out, bias))
    assert torch.autograd.gradgradcheck(bias_add, (out, bias))


def test_bias_add_without_a_bias_is_its_input():
    out = _r(3, 2)
    assert bias_add(out, None) is out


def _backward_graphs(model, *args):
    """The backward graphs AOT autograd makes of ``model(*args)`` compiled with ``fullgraph``."""
    graphs = []

    def forward(gm, _):
        return make_boxed_func(gm)

    def backward(gm, _):
        graphs.append(str(gm.graph))
        return make_boxed_func(gm)

    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=aot_autograd(fw_compiler=forward, bw_compiler=backward))
    out = compiled(*args)
    out.square().sum().backward()
    return graphs


def _layers():
    return {
        "gcn": lambda: ss.nn.GCNConv(5, 4),
        "gat": lambda: ss.nn.GATConv(5, 2, heads=2),
        "sage_widening": lambda: ss.nn.SAGEConv(5, 8),
        "sage_narrowing": lambda: ss.nn.SAGEConv(5, 3),
        "rgcn": lambda: ss.nn.RGCNConv(5, 4, 4),
        "linear": lambda: Linear(5, 4),
    }


@pytest.mark.parametrize("name", list(_layers()))
def test_compiled_layers_take_the_bias_gradient_through_the_op(name, small_graph):
    layer = _layers()[name]().to(DT)
    x = _r(small_graph.graph.num_nodes, 5, seed=3)
    if name == "linear":
        graphs = _backward_graphs(layer, x)
    else:
        graphs = _backward_graphs(lambda g, x: layer(g, x), small_graph.graph, x)
    assert graphs and any("seastar.column_sum" in g for g in graphs)
