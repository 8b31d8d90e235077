"""AGNNConv and ResGatedGraphConv against PyG's: AGNN's learned or fixed beta with and without
self loops; ResGatedGraphConv's activations (in the program, and one that runs in torch), edge
features, no root weight or bias, bipartite inputs."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F_IN, C = 5, 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("loops", [True, False])
def test_agnn(loops, requires_grad, backend):
    ours, theirs = pair(lambda: snn.AGNNConv(requires_grad, loops), lambda: pnn.AGNNConv(requires_grad, loops),
                        backend)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


ACTS = {"sigmoid": torch.nn.Sigmoid, "relu": torch.nn.ReLU, "gelu_in_torch": torch.nn.GELU}


def gated(in_channels=F_IN, backend=None, act="sigmoid", **kw):
    return pair(lambda: snn.ResGatedGraphConv(in_channels, C, act=ACTS[act](), **kw),
                lambda: pnn.ResGatedGraphConv(in_channels, C, act=ACTS[act](), **kw), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("act", sorted(ACTS))
def test_res_gated_activations(act, backend):
    ours, theirs = gated(backend=backend, act=act)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("act", ["sigmoid", "gelu_in_torch"])
def test_res_gated_edge_features(act):
    ours, theirs = gated(act=act, edge_dim=4, root_weight=False, bias=False)
    ea = torch.randn(hazard_edges().shape[1], 4, generator=torch.Generator().manual_seed(3), dtype=DT)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges(), ea])


def test_res_gated_without_activation_is_the_identity_gate():
    """act=None (which PyG's layer cannot call) gates by the sum itself, in the program: the same
    as an Identity module, which runs in torch."""
    ours, same = pair(lambda: snn.ResGatedGraphConv(F_IN, C, act=None),
                      lambda: snn.ResGatedGraphConv(F_IN, C, act=torch.nn.Identity()))
    assert_same(ours, same, [features(NUM_NODES, F_IN), hazard_edges()])


def test_res_gated_bipartite():
    ours, theirs = gated(in_channels=(F_IN, 4))
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, 4, seed=2))
    assert_same(ours, theirs, [x, bipartite_edges()])


def test_res_gated_edge_attr_must_match_edge_dim():
    ours, _ = gated()
    ea = torch.randn(hazard_edges().shape[1], 4, dtype=DT)
    with pytest.raises(ValueError, match="exactly when the layer has edge_dim"):
        ours(features(NUM_NODES, F_IN), hazard_edges(), ea)
