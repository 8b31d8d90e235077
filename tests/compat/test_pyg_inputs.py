"""The calling conventions shared by every layer: the graph cache keyed by edge_index identity
and version (bounded, weakly referenced), Data objects, sampled blocks called Seastar's way,
SparseTensor-like adjacencies, state dicts in both directions, and malformed inputs."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import gc
import types

import torch
import torch_geometric.nn as pnn
from torch_geometric.data import Data

import seastar as ss
import seastar.nn as snn
from seastar.nn._structure import from_edge_index
from seastar.nn._tensor_cache import GRAPHS
from pyg_compare import DT, NUM_DST, NUM_NODES, NUM_SRC, bipartite_edges, features, hazard_edges, pair


def gcn():
    ours, theirs = pair(lambda: snn.GCNConv(5, 3), lambda: pnn.GCNConv(5, 3))
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def test_graph_is_built_once_per_edge_index():
    ei = hazard_edges()
    first = from_edge_index(ei, NUM_NODES, NUM_NODES)
    assert from_edge_index(ei, NUM_NODES, NUM_NODES) is first
    ours, _ = gcn()
    x = features(NUM_NODES, 5)
    ours(x, ei)
    n = len(GRAPHS)
    ours(x, ei)
    assert len(GRAPHS) == n
    assert from_edge_index(ei.clone(), NUM_NODES, NUM_NODES) is not first  # a new tensor: its own entry


def test_in_place_change_rebuilds_the_graph():
    ours, theirs = gcn()
    x, ei = features(NUM_NODES, 5), hazard_edges()
    before = ours(x, ei)
    ei[1, 0] = 9  # the hub loses an in-edge; _version changes
    after = ours(x, ei)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, theirs(x, ei), rtol=1e-10, atol=1e-10)


def test_entries_die_with_their_tensor_and_the_cache_is_bounded():
    GRAPHS.clear()
    ei = hazard_edges()
    from_edge_index(ei, NUM_NODES, NUM_NODES)
    assert len(GRAPHS) == 1
    del ei
    gc.collect()
    assert len(GRAPHS) == 0
    alive = [hazard_edges() for _ in range(GRAPHS.maxsize + 10)]
    for t in alive:
        from_edge_index(t, NUM_NODES, NUM_NODES)
    assert len(GRAPHS) == GRAPHS.maxsize


def test_data_objects():
    ours, theirs = gcn()
    x, ei = features(NUM_NODES, 5), hazard_edges()
    w = torch.rand(ei.shape[1], dtype=DT)
    expect = theirs(x, ei, w)
    for data in (Data(x=x, edge_index=ei, edge_weight=w), types.SimpleNamespace(x=x, edge_index=ei, edge_weight=w)):
        torch.testing.assert_close(ours(data), expect, rtol=1e-10, atol=1e-10)


def test_malformed_inputs():
    ours, _ = gcn()
    x, ei = features(NUM_NODES, 5), hazard_edges()
    with pytest.raises(ValueError, match="integer type"):
        ours(x, ei.double())
    with pytest.raises(ValueError, match="size '2' in the first dimension"):
        ours(x, torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="outside the graph"):
        ours(x[:5], ei)
    with pytest.raises(ValueError, match="edge_weight must be"):
        ours(x, ei, torch.ones(3, dtype=DT))
    with pytest.raises(TypeError, match="graph first|no graph"):
        ours(x)
    sage = snn.SAGEConv(5, 3).to(DT)
    with pytest.raises(ValueError, match="expected size"):
        sage(x, ei, size=(NUM_NODES + 1, NUM_NODES))


REVERSE = {
    "gcn": lambda m: m.GCNConv(5, 3),
    "gat": lambda m: m.GATConv((5, 4), 3, heads=2, edge_dim=2, residual=True),
    "sage": lambda m: m.SAGEConv(5, 3, aggr=["mean", "softmax"], project=True,
                                 aggr_kwargs=dict(aggrs_kwargs=[{}, dict(learn=True)])),
    "gin": lambda m: m.GINConv(torch.nn.Linear(5, 3), train_eps=True),
    "rgcn": lambda m: m.RGCNConv((5, 4), 3, 4, num_bases=2),
    "hgt": lambda m: m.HGTConv({"a": 5, "b": 4}, 4, (["a", "b"], [("a", "to", "b"), ("b", "to", "a")]), heads=2),
}


@pytest.mark.parametrize("name", sorted(REVERSE))
def test_state_dicts_load_both_ways(name):
    ours, theirs = REVERSE[name](snn), REVERSE[name](pnn)
    theirs.load_state_dict(ours.state_dict())
    ours.load_state_dict(theirs.state_dict())
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}


BLOCK_LAYERS = {
    "sage": lambda m: m.SAGEConv(5, 3),
    "gat": lambda m: m.GATConv(5, 3, heads=2),
    "gin": lambda m: m.GINConv(torch.nn.Linear(5, 3), train_eps=True),
}


@pytest.mark.parametrize("name", sorted(BLOCK_LAYERS))
def test_block_called_seastars_way(name):
    """layer(block, x): x has num_src rows, the first num_dst are the destinations (DGL's
    convention), which is PyG's layer((x, x[:num_dst]), edge_index)."""
    ours, theirs = pair(lambda: BLOCK_LAYERS[name](snn), lambda: BLOCK_LAYERS[name](pnn))
    ours.load_state_dict(theirs.state_dict())
    ei = bipartite_edges()
    block = ss.Graph.from_edge_index(ei, num_nodes=(NUM_SRC, NUM_DST))
    x = features(NUM_SRC, 5)
    torch.testing.assert_close(ours(block, x), theirs((x, x[:NUM_DST]), ei), rtol=1e-10, atol=1e-10)


class FakeSparseTensor:
    """torch_sparse.SparseTensor's interface, as far as the layers read it."""

    def __init__(self, row, col, value, sizes):
        self._row, self._col, self._value, self._sizes = row, col, value, sizes
        self.storage = types.SimpleNamespace(value=lambda: self._value)

    def coo(self):
        return self._row, self._col, self._value

    def sparse_sizes(self):
        return self._sizes


def test_sparse_tensor_like_adjacency():
    """On a graph without self loops PyG's SparseTensor and torch.sparse paths agree."""
    ours, theirs = gcn()
    ei = hazard_edges()
    ei = ei[:, ei[0] != ei[1]]
    order = torch.argsort(ei[1] * NUM_NODES + ei[0])
    row, col = ei[1, order], ei[0, order]
    w = torch.rand(ei.shape[1], dtype=DT) + 0.1
    adj = FakeSparseTensor(row, col, w, (NUM_NODES, NUM_NODES))
    ref = torch.sparse_coo_tensor(torch.stack([row, col]), w, (NUM_NODES, NUM_NODES)).coalesce()
    x = features(NUM_NODES, 5)
    torch.testing.assert_close(ours(x, adj), theirs(x, ref), rtol=1e-10, atol=1e-10)
