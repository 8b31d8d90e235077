"""TransformerConv against PyG's: heads, concat, beta, root weight, edge features, bipartite
inputs, attention weights, dropout=1, a sparse adjacency."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.utils import to_torch_csr_tensor

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F_IN, C = 5, 3
OPTIONS = {
    "default": dict(heads=2),
    "mean_heads": dict(heads=3, concat=False),
    "beta": dict(heads=2, beta=True),
    "beta_mean": dict(heads=2, concat=False, beta=True),
    "no_root": dict(heads=2, root_weight=False, bias=False),
    "edge_features": dict(heads=2, edge_dim=4),
}


def layers(in_channels=F_IN, backend=None, **kw):
    return pair(lambda: snn.TransformerConv(in_channels, C, **kw), lambda: pnn.TransformerConv(in_channels, C, **kw),
                backend)


def edge_attr(dim=4, seed=4):
    return torch.randn(hazard_edges().shape[1], dim, generator=torch.Generator().manual_seed(seed), dtype=DT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_edge_index(option, backend):
    ours, theirs = layers(backend=backend, **OPTIONS[option])
    inputs = [features(NUM_NODES, F_IN), hazard_edges()]
    assert_same(ours, theirs, inputs + ([edge_attr()] if "edge_dim" in OPTIONS[option] else []))


def test_bipartite_with_edge_features():
    ours, theirs = layers(in_channels=(F_IN, 4), heads=2, edge_dim=2, beta=True)
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, 4, seed=2))
    ea = torch.randn(bipartite_edges().shape[1], 2, generator=torch.Generator().manual_seed(3), dtype=DT)
    assert_same(ours, theirs, [x, bipartite_edges(), ea])


def test_attention_weights():
    ours, theirs = layers(heads=2, edge_dim=4)
    out, _ = assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr()],
                         call=lambda l, x, ei, ea: l(x, ei, ea, return_attention_weights=True))
    assert out[1][1].shape == (hazard_edges().shape[1], 2)


def test_full_dropout_leaves_the_skip():
    ours, theirs = layers(heads=2, dropout=1.0)
    ours.train(), theirs.train()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


def test_sparse_adjacency():
    ours, theirs = layers(heads=2)
    adj_t = to_torch_csr_tensor(hazard_edges().flip(0), size=(NUM_NODES, NUM_NODES))
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), adj_t])


def test_edge_attr_without_edge_dim_is_refused():
    ours, _ = layers(heads=2)
    with pytest.raises(ValueError, match="without edge_dim"):
        ours(features(NUM_NODES, F_IN), hazard_edges(), edge_attr())
