"""GINEConv against PyG's: a fixed and a learned eps, edge features of the input's width or
projected (edge_dim), bipartite inputs, and the errors."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F_IN = 4


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(F_IN, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def layers(backend=None, **kw):
    return pair(lambda: snn.GINEConv(mlp(), **kw), lambda: pnn.GINEConv(mlp(), **kw), backend)


def edge_attr(num_edges, dim, seed=4):
    return torch.randn(num_edges, dim, generator=torch.Generator().manual_seed(seed), dtype=DT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("option", [dict(), dict(eps=0.3, train_eps=True), dict(edge_dim=2)], ids=str)
def test_edge_index(option, backend):
    ours, theirs = layers(backend=backend, **option)
    ei = hazard_edges()
    ea = edge_attr(ei.shape[1], option.get("edge_dim", F_IN))
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, ea])


def test_bipartite():
    ours, theirs = layers(train_eps=True)
    ei = bipartite_edges()
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, F_IN, seed=2))
    assert_same(ours, theirs, [x, ei, edge_attr(ei.shape[1], F_IN)])


def test_mismatched_widths_and_a_missing_edge_attr_are_refused():
    ours, _ = layers()
    ei = hazard_edges()
    with pytest.raises(ValueError, match="edge_dim"):
        ours(features(NUM_NODES, F_IN), ei, edge_attr(ei.shape[1], F_IN + 1))
    with pytest.raises(ValueError, match="edge_attr is required"):
        ours(features(NUM_NODES, F_IN), ei)
