"""Max and min aggregations at exact ties, against PyG's layers with copied weights.

Ties are ordinary in training: after a ReLU hidden features are full of exact zeros, and
integer-valued features tie everywhere. PyG's max/min aggregations go through
``torch.scatter_reduce`` (amax/amin), whose gradient splits evenly among the tied edges of each
(vertex, feature); Seastar's must be the same. Every case compares the output and the gradient
of every input and parameter in float64, on the hazard graph (a hub, self loops, duplicate
edges from one source, isolated vertices) and on a bipartite block, with inputs checked to tie
across different sources (a tie between copies of one edge would hide a wrong rule, since its
shares return to the same source row).
"""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges, features,
                         hazard_edges, on_device, pair, randomise, seeded)

F_IN, F_OUT = 4, 3


def integer_valued(n: int, seed: int = 0) -> torch.Tensor:
    """Values in {0, 1, 2}: most (vertex, feature) maxima are shared by several neighbours."""
    return torch.randint(0, 3, (n, F_IN), generator=torch.Generator().manual_seed(seed)).to(DT)


def post_relu(n: int, seed: int = 0) -> torch.Tensor:
    """A hidden layer's output: about half the entries exactly 0."""
    return torch.relu(features(n, F_IN, seed=seed) - 0.3)


INPUTS = {"integer": integer_valued, "relu": post_relu}


def _ties_across_sources(x: torch.Tensor, edges: torch.Tensor, reduce: str) -> int:
    """How many (centre, feature) extremes are attained by two different source rows."""
    src, dst = edges
    n = int(dst.max()) + 1
    idx = dst.view(-1, 1).expand(-1, x.shape[1])
    best = x.new_zeros(n, x.shape[1]).scatter_reduce(0, idx, x[src], reduce=reduce, include_self=False)
    count = 0
    for d in range(n):
        rows = src[dst == d].unique()
        if rows.numel() > 1:
            count += int(((x[rows] == best[d]).sum(0) > 1).sum())
    return count


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("aggr", ["max", "min"])
def test_sage(aggr, kind, backend):
    x, edges = INPUTS[kind](NUM_NODES), hazard_edges()
    assert _ties_across_sources(x, edges, "a" + aggr) > 0, "the inputs must tie across sources"
    ours, theirs = pair(lambda: snn.SAGEConv(F_IN, F_OUT, aggr=aggr), lambda: pnn.SAGEConv(F_IN, F_OUT, aggr=aggr),
                        backend)
    assert_same(ours, theirs, [x, edges])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_sage_bipartite(kind, backend):
    x_src, x_dst, edges = INPUTS[kind](NUM_SRC), INPUTS[kind](NUM_DST, seed=1), bipartite_edges()
    assert _ties_across_sources(x_src, edges, "amax") > 0
    ours, theirs = pair(lambda: snn.SAGEConv((F_IN, F_IN), F_OUT, aggr="max"),
                        lambda: pnn.SAGEConv((F_IN, F_IN), F_OUT, aggr="max"), backend)
    assert_same(ours, theirs, [x_src, x_dst, edges], call=lambda layer, xs, xd, e: layer((xs, xd), e))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sage_projected(backend):
    """project=True puts a ReLU before the max: ties come from the layer itself."""
    ours, theirs = pair(lambda: snn.SAGEConv(F_IN, F_OUT, aggr="max", project=True),
                        lambda: pnn.SAGEConv(F_IN, F_OUT, aggr="max", project=True), backend)
    assert_same(ours, theirs, [integer_valued(NUM_NODES) - 1.0, hazard_edges()])


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("mode", ["cat", "sum", "max"])
def test_multi_aggregation(mode, kind):
    """PyG's MultiAggregation lists: max and min beside sum and mean, combined three ways."""
    kw = dict(aggr=["max", "mean", "min", "sum"], aggr_kwargs=dict(mode=mode))
    ours, theirs = pair(lambda: snn.SAGEConv(F_IN, F_OUT, **kw), lambda: pnn.SAGEConv(F_IN, F_OUT, **kw))
    assert_same(ours, theirs, [INPUTS[kind](NUM_NODES), hazard_edges()])


def test_two_layers_after_relu():
    """The case the rule matters for in training: a second max layer on the first's ReLU."""
    class Net(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.a, self.b = m.SAGEConv(F_IN, 8, aggr="max"), m.SAGEConv(8, F_OUT, aggr="max")

        def forward(self, x, edges):
            return self.b(torch.relu(self.a(x, edges)), edges)

    theirs = randomise(seeded(lambda: Net(pnn)).to(DT))
    ours = seeded(lambda: Net(snn)).to(DT)
    assert_same(ours, theirs, [integer_valued(NUM_NODES), hazard_edges()])


@pytest.mark.parametrize("aggr", ["max", "min"])
def test_hetero_conv(aggr):
    """HeteroConv with SAGE max per relation and a max/min across relations."""
    x = {"a": integer_valued(6), "b": post_relu(5, seed=2)}
    edges = {("a", "to", "b"): torch.tensor([[0, 1, 2, 3, 4, 5, 1], [0, 0, 0, 1, 1, 2, 4]]),
             ("b", "back", "b"): torch.tensor([[0, 1, 2, 3, 4], [1, 1, 1, 0, 0]]),
             ("b", "up", "a"): torch.tensor([[0, 1, 2, 3], [0, 0, 5, 5]])}

    def convs(m):
        return m.HeteroConv({k: m.SAGEConv((-1, -1), F_OUT, aggr="max") for k in edges}, aggr=aggr)

    theirs = seeded(lambda: convs(pnn)).to(DT)
    ours = seeded(lambda: convs(snn)).to(DT)
    theirs(x, edges), ours(x, edges)  # materialise the lazy weights
    randomise(theirs)
    edges = on_device(edges)  # the call reads them from here, not from the moved inputs
    assert_same(ours, theirs, [x["a"], x["b"]], call=lambda layer, xa, xb: layer({"a": xa, "b": xb}, edges))
