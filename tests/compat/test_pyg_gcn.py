"""GCNConv against PyG's: edge_index, edge weights, sparse adjacencies, self-loop rules, improved,
cached, flow, normalize, batches, sparse features, lazy widths, errors and repr."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

import seastar as ss
import seastar.nn as snn
from pyg_compare import BACKENDS, DT, NUM_NODES, assert_same, features, hazard_edges, pair

F_IN, F_OUT = 5, 3
OPTIONS = {
    "default": {},
    "improved": dict(improved=True),
    "no_loops": dict(add_self_loops=False),
    "unnormalized": dict(normalize=False),
    "no_bias": dict(bias=False),
}


def layers(backend=None, **kw):
    return pair(lambda: snn.GCNConv(F_IN, F_OUT, **kw), lambda: pnn.GCNConv(F_IN, F_OUT, **kw), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_edge_index(option, backend):
    ours, theirs = layers(backend, **OPTIONS[option])
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_edge_weight(option, backend):
    """Learned weights: their gradient is compared too; an existing loop keeps its weight."""
    ours, theirs = layers(backend, **OPTIONS[option])
    ei = hazard_edges()
    w = torch.rand(ei.shape[1], generator=torch.Generator().manual_seed(3), dtype=DT) + 0.1
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, w])


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_adjacency(layout, weighted):
    """adj_t (rows = destinations): PyG's sparse path adds fill to the diagonal (A + I)."""
    ours, theirs = layers()
    ei = hazard_edges()
    w = torch.rand(ei.shape[1], dtype=DT) + 0.1 if weighted else torch.ones(ei.shape[1], dtype=DT)
    make = to_torch_coo_tensor if layout == "coo" else to_torch_csr_tensor
    adj_t = make(ei.flip(0), w, size=(NUM_NODES, NUM_NODES))
    if layout == "coo":
        adj_t = adj_t.coalesce()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), adj_t])


def test_improved_changes_loops_of_weighted_graphs_only():
    """PyG's gcn_norm fills new loops with 2 only where there are weights to fill."""
    x, ei = features(NUM_NODES, F_IN), hazard_edges()
    a, b = layers(improved=True)[0], layers()[0]
    b.load_state_dict(a.state_dict())
    assert torch.allclose(a(x, ei), b(x, ei))
    w = torch.ones(ei.shape[1], dtype=DT)
    assert not torch.allclose(a(x, ei, w), b(x, ei, w))


def test_cached_keeps_the_first_graph():
    ours, theirs = layers(cached=True)
    ours.load_state_dict(theirs.state_dict())
    x, ei = features(NUM_NODES, F_IN), hazard_edges()
    other = ei[:, :5]
    for layer in (ours, theirs):
        layer(x, ei)
        assert layer._cached_edge_index is not None
    torch.testing.assert_close(ours(x, other), theirs(x, other), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ours(x, other), ours(x, ei), rtol=0, atol=0)
    ours.reset_parameters()
    assert ours._cached_edge_index is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_flow_target_to_source(backend):
    ours, theirs = layers(backend, flow="target_to_source")
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_graph_batch(backend):
    ours, theirs = layers(backend)
    x = torch.randn(3, NUM_NODES, F_IN, dtype=DT)
    out, _ = assert_same(ours, theirs, [x, hazard_edges()])
    assert out.shape == (3, NUM_NODES, F_OUT)


def test_sparse_features():
    ours, theirs = layers()
    x = features(NUM_NODES, F_IN) * (torch.rand(NUM_NODES, F_IN) < 0.4)
    assert_same(ours, theirs, [x.to_sparse_coo(), hazard_edges()], check_grads=False)


def test_lazy_in_channels():
    ours = snn.GCNConv(-1, F_OUT).to(DT)
    theirs = pnn.GCNConv(-1, F_OUT).to(DT)
    x, ei = features(NUM_NODES, F_IN), hazard_edges()
    assert str(ours) == str(theirs) == f"GCNConv(-1, {F_OUT})"
    theirs(x, ei)
    assert_same(ours, theirs, [x, ei])  # ours materialises from PyG's state dict
    fresh_layer = snn.GCNConv(-1, F_OUT).to(DT)
    assert fresh_layer(x, ei).shape == (NUM_NODES, F_OUT)
    assert fresh_layer.lin.weight.shape == (F_OUT, F_IN)


def test_graph_first_equals_edge_index():
    ours, _ = layers()
    x, ei = features(NUM_NODES, F_IN), hazard_edges()
    g = ss.Graph.from_edge_index(ei, num_nodes=NUM_NODES)
    torch.testing.assert_close(ours(g, x), ours(x, ei), rtol=0, atol=0)


def test_errors_and_repr():
    with pytest.raises(ValueError, match="does not support adding self-loops"):
        snn.GCNConv(16, 32, normalize=False, add_self_loops=True)
    with pytest.raises(ValueError, match="bipartite"):
        snn.GCNConv(F_IN, F_OUT)((features(4, F_IN), features(3, F_IN)), hazard_edges()[:, :2])
    assert str(snn.GCNConv(16, 32)) == str(pnn.GCNConv(16, 32)) == "GCNConv(16, 32)"
