"""GraphConv against PyG's: every aggregation, with and without edge weights (their gradients
too), Seastar's conv(graph, x), bipartite inputs, sparse adjacencies (weighted), Data objects,
batches, lazy widths, and the errors."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.data import Data
from torch_geometric.utils import to_torch_csr_tensor

import seastar as ss
import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair, randomise)

F_IN = 5
AGGRS = ["add", "mean", "max", "min"]


def layers(in_channels=F_IN, out=3, backend=None, **kw):
    return pair(lambda: snn.GraphConv(in_channels, out, **kw), lambda: pnn.GraphConv(in_channels, out, **kw),
                backend)


def weights(num_edges: int, seed: int = 1) -> torch.Tensor:
    """Positive and negative weights: a max of weighted messages then picks other edges than a
    max of the features."""
    return torch.randn(num_edges, generator=torch.Generator().manual_seed(seed), dtype=DT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("out", [3, 8], ids=["narrow", "wide"])  # narrow: add / mean aggregate x W
@pytest.mark.parametrize("aggr", AGGRS)
def test_aggregations(aggr, out, backend):
    ours, theirs = layers(out=out, backend=backend, aggr=aggr)
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei])
    # the edge weights require grad (assert_same's fresh copies): their gradient is compared too
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, weights(ei.shape[1])], load=False)
    assert str(ours) == str(theirs) == f"GraphConv({F_IN}, {out})"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("aggr", ["add", "max"])
def test_graph_first_equals_edge_index(aggr, backend):
    """Seastar's conv(graph, x, edge_weight) is PyG's conv(x, edge_index, edge_weight)."""
    ours, theirs = layers(backend=backend, aggr=aggr)
    ei = hazard_edges()
    graph = ss.Graph.from_edge_index(ei, num_nodes=NUM_NODES)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, weights(ei.shape[1])],
                call=lambda layer, x, ei, w: layer(graph, x, w), their_call=lambda layer, x, ei, w: layer(x, ei, w))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_bipartite(aggr, backend):
    ours, theirs = layers((F_IN, 4), backend=backend, aggr=aggr)
    x = (features(NUM_SRC, F_IN), features(NUM_DST, 4, seed=1))
    ei = bipartite_edges()
    assert_same(ours, theirs, [x, ei, weights(ei.shape[1])])
    assert_same(ours, theirs, [(x[0], None), ei], load=False,
                call=lambda layer, x, ei: layer(x, ei, size=(NUM_SRC, NUM_DST)))


@pytest.mark.parametrize("aggr", AGGRS)
def test_weighted_sparse_adjacency(aggr):
    """PyG's sparse path weighs the messages by adj_t's values."""
    ours, theirs = layers(aggr=aggr)
    ei = hazard_edges()
    adj_t = to_torch_csr_tensor(ei.flip(0), weights(ei.shape[1]).abs() + 0.5, size=(NUM_NODES, NUM_NODES))
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), adj_t])


def test_data_object_and_static_graph_batch():
    ours, theirs = layers(aggr="mean")
    ei = hazard_edges()
    data = Data(x=features(NUM_NODES, F_IN), edge_index=ei, edge_weight=weights(ei.shape[1]))
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(ours(data), theirs(data.x, data.edge_index, data.edge_weight), rtol=1e-10,
                               atol=1e-10)
    out, _ = assert_same(ours, theirs, [torch.randn(2, NUM_NODES, F_IN, dtype=DT), ei])
    assert out.shape == (2, NUM_NODES, 3)


def test_lazy_in_channels():
    ours, theirs = layers(-1)
    x, ei = features(NUM_NODES, F_IN), hazard_edges()
    theirs(x, ei)  # materialise PyG's lazy weights
    randomise(theirs)
    assert_same(ours, theirs, [x, ei])
    assert str(ours) == str(theirs) == "GraphConv(-1, 3)"


def test_errors():
    x, ei = features(NUM_NODES, F_IN), hazard_edges()
    conv = snn.GraphConv(F_IN, 3).to(DT)
    with pytest.raises(ValueError, match="aggr must be one of"):
        snn.GraphConv(F_IN, 3, aggr="median")
    with pytest.raises(ValueError, match="edge_weight must be \\[E\\]"):
        conv(x, ei, torch.ones(ei.shape[1] - 1, dtype=DT))
    adj_t = to_torch_csr_tensor(ei.flip(0), size=(NUM_NODES, NUM_NODES))
    with pytest.raises(ValueError, match="sparse adjacency's values are its edge weights"):
        conv(x, adj_t, torch.ones(ei.shape[1], dtype=DT))
    with pytest.raises(ValueError, match="outside the graph"):
        conv(x[:5], ei)
    with pytest.raises(TypeError, match="x \\(or x_src\\) must be a \\[N, F\\] tensor"):
        conv(None, ei)
    with pytest.raises(TypeError, match="takes the graph first"):
        conv(x, ss.Graph.from_edge_index(ei, num_nodes=NUM_NODES))
