"""GATConv against PyG's: heads, concat, self loops, edge features and fill values, bipartite
inputs, residual, attention weights, dropout=1, sparse adjacencies, lazy widths, empty graphs."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F_IN, C = 5, 3
OPTIONS = {
    "default": dict(heads=2),
    "mean_heads": dict(heads=3, concat=False, negative_slope=0.1),
    "no_loops": dict(heads=2, add_self_loops=False, bias=False),
    "residual": dict(heads=2, residual=True),
    "residual_mean": dict(heads=2, concat=False, residual=True),
}


def layers(in_channels=F_IN, backend=None, **kw):
    return pair(lambda: snn.GATConv(in_channels, C, **kw), lambda: pnn.GATConv(in_channels, C, **kw), backend)


def edge_attr(dim, seed=4):
    e = hazard_edges().shape[1]
    return torch.randn((e, dim) if dim else (e,), generator=torch.Generator().manual_seed(seed), dtype=DT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_edge_index(option, backend):
    ours, theirs = layers(backend=backend, **OPTIONS[option])
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fill", ["mean", "add", "max", 0.5, "tensor"])
@pytest.mark.parametrize("dim", [0, 1, 4])
def test_edge_attr(dim, fill, backend):
    if fill == "tensor":
        fill = torch.arange(max(dim, 1), dtype=DT) * 0.3 - 0.2
    ours, theirs = layers(backend=backend, heads=2, edge_dim=max(dim, 1), fill_value=fill)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr(dim)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_edge_attr_without_loops(backend):
    ours, theirs = layers(backend=backend, heads=2, edge_dim=4, add_self_loops=False)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr(4)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("loops", [False, True])
def test_bipartite(loops, residual, backend):
    ours, theirs = layers((F_IN, 4), backend, heads=2, add_self_loops=loops, residual=residual)
    x = (features(NUM_SRC, F_IN), features(NUM_DST, 4, seed=1))
    assert_same(ours, theirs, [x, bipartite_edges()], call=lambda l, x, ei: l(x, ei))
    assert_same(ours, theirs, [x, bipartite_edges()], call=lambda l, x, ei: l(x, ei, size=(NUM_SRC, NUM_DST)),
                load=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bipartite_without_destination_features(backend):
    ours, theirs = layers((F_IN, 4), backend, heads=2, residual=True)
    x = (features(NUM_SRC, F_IN), None)
    assert_same(ours, theirs, [x, bipartite_edges()], call=lambda l, x, ei: l(x, ei, size=(NUM_SRC, NUM_DST)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_projection_on_pairs(backend):
    """int in_channels with (x_src, x_dst): one projection for both, as PyG."""
    ours, theirs = layers(F_IN, backend, heads=2)
    x = (features(NUM_SRC, F_IN), features(NUM_DST, F_IN, seed=2))
    assert_same(ours, theirs, [x, bipartite_edges()])


def test_return_attention_weights():
    ours, theirs = layers(heads=2, edge_dim=4)
    out, ref = assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), edge_attr(4)],
                           call=lambda l, x, ei, ea: l(x, ei, ea, return_attention_weights=True))
    assert out[1][0].dtype == torch.int64 and out[1][1].shape == (out[1][0].shape[1], 2)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_adjacency_and_attention(layout):
    ours, theirs = layers(heads=2)
    ei = hazard_edges()
    make = to_torch_coo_tensor if layout == "coo" else to_torch_csr_tensor
    adj_t = make(ei.flip(0), torch.ones(ei.shape[1], dtype=DT), size=(NUM_NODES, NUM_NODES))
    x = features(NUM_NODES, F_IN)
    assert_same(ours, theirs, [x, adj_t])
    out, ref = assert_same(ours, theirs, [x, adj_t], load=False,
                           call=lambda l, x, a: l(x, a, return_attention_weights=True))
    assert out[1][0].layout == ref[1][0].layout and out[1][0].shape == ref[1][0].shape


def test_sparse_adjacency_with_edge_attr_is_not_implemented():
    ours, _ = layers(heads=2, edge_dim=4)
    adj_t = to_torch_csr_tensor(hazard_edges().flip(0), size=(NUM_NODES, NUM_NODES))
    with pytest.raises(NotImplementedError, match="edge_attr"):
        ours(features(NUM_NODES, F_IN), adj_t, edge_attr(4))


def test_dropout_one_in_training():
    ours, theirs = layers(heads=2, dropout=1.0)
    ours.train(), theirs.train()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


def test_lazy_bipartite():
    ours, theirs = snn.GATConv((-1, -1), C, heads=2).to(DT), pnn.GATConv((-1, -1), C, heads=2).to(DT)
    x = (features(NUM_SRC, F_IN), features(NUM_DST, 4, seed=1))
    theirs(x, bipartite_edges())
    assert_same(ours, theirs, [x, bipartite_edges()])
    assert str(ours) == str(theirs) == "GATConv((-1, -1), 3, heads=2)"


def test_empty_graph():
    ours, theirs = layers(heads=2)
    out, _ = assert_same(ours, theirs, [features(0, F_IN), torch.empty(2, 0, dtype=torch.long)], check_grads=False)
    assert out.shape == (0, 2 * C)


def test_static_graph_is_an_error():
    with pytest.raises(ValueError, match="[Ss]tatic graphs"):
        snn.GATConv(F_IN, C)(torch.randn(2, NUM_NODES, F_IN), hazard_edges())
