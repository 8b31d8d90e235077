"""GATv2Conv against PyG's: heads, concat, self loops, edge features and fill values, shared
weights, bipartite inputs, residual, attention weights, dropout=1, a sparse adjacency."""
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
    "mean_heads": dict(heads=3, concat=False, negative_slope=0.1),
    "no_loops": dict(heads=2, add_self_loops=False, bias=False),
    "shared": dict(heads=2, share_weights=True),
    "residual": dict(heads=2, residual=True),
    "residual_mean": dict(heads=2, concat=False, residual=True),
}


def layers(in_channels=F_IN, backend=None, **kw):
    return pair(lambda: snn.GATv2Conv(in_channels, C, **kw), lambda: pnn.GATv2Conv(in_channels, C, **kw), backend)


def edge_attr(dim, seed=4):
    e = hazard_edges().shape[1]
    return torch.randn((e, dim) if dim else (e,), generator=torch.Generator().manual_seed(seed), dtype=DT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_edge_index(option, backend):
    ours, theirs = layers(backend=backend, **OPTIONS[option])
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("fill", ["mean", "add", 0.5])
@pytest.mark.parametrize("dim", [0, 4])
def test_edge_attr(dim, fill):
    ours, theirs = layers(heads=2, edge_dim=max(dim, 1), fill_value=fill)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr(dim)])


def test_edge_attr_without_loops():
    ours, theirs = layers(heads=2, edge_dim=4, add_self_loops=False)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr(4)])


@pytest.mark.parametrize("residual", [False, True])
def test_bipartite(residual):
    ours, theirs = layers(in_channels=(F_IN, 4), heads=2, add_self_loops=False, residual=residual)
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, 4, seed=2))
    assert_same(ours, theirs, [x, bipartite_edges()])


def test_attention_weights():
    ours, theirs = layers(heads=2, edge_dim=4)
    out, _ = assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr(4)],
                         call=lambda l, x, ei, ea: l(x, ei, ea, return_attention_weights=True))
    assert out[1][0].dtype == torch.int64 and out[1][1].shape == (out[1][0].shape[1], 2)


def test_full_dropout_zeroes_the_attention():
    # dropout=1 drops every attention weight in training: both layers give the bias alone
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
        ours(features(NUM_NODES, F_IN), hazard_edges(), edge_attr(4))
