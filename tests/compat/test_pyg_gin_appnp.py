"""GINConv and APPNP against PyG's: eps, bipartite inputs, sparse adjacencies with values, edge
weights, normalisation and self-loop options, cached, dropout=1, batches."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F = 5


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(F, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4))


def gin(backend=None, **kw):
    return pair(lambda: snn.GINConv(mlp(), **kw), lambda: pnn.GINConv(mlp(), **kw), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kw", [dict(), dict(eps=0.3), dict(train_eps=True)], ids=["eps0", "eps", "train_eps"])
def test_gin(kw, backend):
    ours, theirs = gin(backend, **kw)
    assert_same(ours, theirs, [features(NUM_NODES, F), hazard_edges()])
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gin_bipartite(backend):
    ours, theirs = gin(backend, train_eps=True)
    x = (features(NUM_SRC, F), features(NUM_DST, F, seed=1))
    assert_same(ours, theirs, [x, bipartite_edges()])
    assert_same(ours, theirs, [(x[0], None), bipartite_edges()], load=False,
                call=lambda l, x, ei: l(x, ei, size=(NUM_SRC, NUM_DST)))


def test_gin_weighted_sparse_adjacency():
    ours, theirs = gin(train_eps=True)
    ei = hazard_edges()
    w = torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(2), dtype=DT) + 0.5
    adj_t = to_torch_csr_tensor(ei.flip(0), w, size=(NUM_NODES, NUM_NODES))
    assert_same(ours, theirs, [features(NUM_NODES, F), adj_t])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gin_static_graph_batch(backend):
    ours, theirs = gin(backend, train_eps=True)
    out, _ = assert_same(ours, theirs, [torch.randn(3, NUM_NODES, F, dtype=DT), hazard_edges()])
    assert out.shape == (3, NUM_NODES, 4)


APPNP_OPTIONS = {"default": dict(K=3, alpha=0.1), "no_loops": dict(K=2, alpha=0.3, add_self_loops=False),
                 "unnormalized": dict(K=2, alpha=0.2, normalize=False), "K0": dict(K=0, alpha=0.1)}


def appnp(backend=None, **kw):
    return pair(lambda: snn.APPNP(**kw), lambda: pnn.APPNP(**kw), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("option", sorted(APPNP_OPTIONS))
def test_appnp(option, weighted, backend):
    ours, theirs = appnp(backend, **APPNP_OPTIONS[option])
    ei = hazard_edges()
    inputs = [features(NUM_NODES, F), ei]
    if weighted:
        inputs.append(torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(3), dtype=DT) + 0.1)
    assert_same(ours, theirs, inputs)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_appnp_sparse_adjacency(layout):
    ours, theirs = appnp(K=3, alpha=0.1)
    ei = hazard_edges()
    make = to_torch_coo_tensor if layout == "coo" else to_torch_csr_tensor
    adj_t = make(ei.flip(0), torch.rand(ei.shape[1], dtype=DT) + 0.1, size=(NUM_NODES, NUM_NODES))
    assert_same(ours, theirs, [features(NUM_NODES, F), adj_t])


def test_appnp_cached_and_dropout_one():
    ours, theirs = appnp(K=2, alpha=0.1, cached=True)
    x, ei = features(NUM_NODES, F), hazard_edges()
    for layer in (ours, theirs):
        layer(x, ei)
        assert layer._cached_edge_index is not None
    torch.testing.assert_close(ours(x, ei[:, :4]), theirs(x, ei[:, :4]), rtol=1e-10, atol=1e-10)
    ours.reset_parameters()
    assert ours._cached_edge_index is None
    drop, ref = appnp(K=2, alpha=0.1, dropout=1.0)
    drop.train(), ref.train()
    assert_same(drop, ref, [x, ei])
    torch.testing.assert_close(drop(x, ei), 0.1 * x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_appnp_static_graph_batch(backend):
    ours, theirs = appnp(backend, K=2, alpha=0.2)
    out, _ = assert_same(ours, theirs, [torch.randn(2, NUM_NODES, F, dtype=DT), hazard_edges()])
    assert out.shape == (2, NUM_NODES, F)
