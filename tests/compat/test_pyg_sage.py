"""SAGEConv against PyG's: every aggregation seastar expresses, lists and their combine modes,
project, normalize, root weight, bipartite inputs, sparse adjacencies (weighted), batches."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.nn.aggr import MLPAggregation
from torch_geometric.utils import to_torch_csr_tensor

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F_IN, F_OUT = 5, 3
AGGRS = ["mean", "sum", "add", "max", "min", "var", "std", "softmax"]


def layers(in_channels=F_IN, out=F_OUT, backend=None, **kw):
    return pair(lambda: snn.SAGEConv(in_channels, out, **kw), lambda: pnn.SAGEConv(in_channels, out, **kw), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("out", [F_OUT, 8], ids=["narrow", "wide"])
@pytest.mark.parametrize("aggr", AGGRS)
def test_aggregations(aggr, out, backend):
    ours, theirs = layers(out=out, backend=backend, aggr=aggr)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("options", [dict(normalize=True), dict(root_weight=False), dict(project=True),
                                     dict(bias=False, aggr="max")], ids=lambda d: "-".join(map(str, d)))
def test_options(options, backend):
    ours, theirs = layers(backend=backend, **options)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("aggr_kwargs", [None, dict(mode="sum"), dict(mode="max"),
                                         dict(mode="proj", mode_kwargs=dict(in_channels=F_IN, out_channels=6)),
                                         dict(mode="attn", mode_kwargs=dict(in_channels=F_IN, out_channels=4,
                                                                            num_heads=2))],
                         ids=["cat", "sum", "max", "proj", "attn"])
def test_aggregation_lists(aggr_kwargs):
    kw = dict(aggr=["mean", "max", "sum", "softmax"], aggr_kwargs=dict(aggr_kwargs or {}))
    kw["aggr_kwargs"]["aggrs_kwargs"] = [{}, {}, {}, dict(learn=True, t=0.7)]
    ours, theirs = layers(**kw)
    ours.eval(), theirs.eval()  # the attention combine has dropout
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


def test_learned_softmax_temperature():
    kw = dict(aggr="softmax", aggr_kwargs=dict(learn=True, t=0.5, channels=F_IN))
    ours, theirs = layers(**kw)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


def test_lstm_on_sorted_edges():
    ei = hazard_edges()
    ei = ei[:, torch.argsort(ei[1], stable=True)]
    ours, theirs = layers(aggr="lstm")
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei])
    with pytest.raises(ValueError, match="'index' tensor is not sorted"):
        ours(features(NUM_NODES, F_IN), hazard_edges())


def test_aggregation_module():
    """A PyG aggregation module is called as PyG calls it."""
    ei = hazard_edges()
    ei = ei[:, torch.argsort(ei[1], stable=True)]
    mlp = dict(in_channels=F_IN, out_channels=F_IN, max_num_elements=8, num_layers=1)
    ours, theirs = layers(aggr=MLPAggregation(**mlp))
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("aggr", ["mean", "max", "softmax"])
def test_bipartite(aggr, backend):
    ours, theirs = layers((F_IN, 4), backend=backend, aggr=aggr)
    x = (features(NUM_SRC, F_IN), features(NUM_DST, 4, seed=1))
    assert_same(ours, theirs, [x, bipartite_edges()])
    assert_same(ours, theirs, [(x[0], None), bipartite_edges()], load=False,
                call=lambda l, x, ei: l(x, ei, size=(NUM_SRC, NUM_DST)))


@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_weighted_sparse_adjacency(aggr):
    """PyG's sparse path multiplies the messages by adj_t's values (sum, mean)."""
    ours, theirs = layers(aggr=aggr)
    ei = hazard_edges()
    w = torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(1), dtype=DT) + 0.5
    adj_t = to_torch_csr_tensor(ei.flip(0), w, size=(NUM_NODES, NUM_NODES))
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), adj_t])


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_graph_batch(backend):
    ours, theirs = layers(backend=backend)
    out, _ = assert_same(ours, theirs, [torch.randn(2, NUM_NODES, F_IN, dtype=DT), hazard_edges()])
    assert out.shape == (2, NUM_NODES, F_OUT)


def test_lazy_and_errors():
    with pytest.raises(ValueError, match="does not support lazy"):
        snn.SAGEConv(-1, F_OUT, project=True)
    with pytest.raises(ValueError, match="Could not resolve"):
        snn.SAGEConv(F_IN, F_OUT, aggr="median")
    lazy = snn.SAGEConv(-1, F_OUT).to(DT)
    assert str(lazy) == "SAGEConv(-1, 3, aggr=mean)"
    assert lazy(features(NUM_NODES, F_IN), hazard_edges()).shape == (NUM_NODES, F_OUT)
