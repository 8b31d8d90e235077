"""EdgeConv against PyG's: an MLP the program runs (every aggregation, several activations, a
Linear without bias), a module that runs in torch, bipartite inputs, and which path each takes."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch.nn import ELU, GELU, LeakyReLU, Linear, ReLU, Sequential, Tanh

import seastar.nn as snn
from pyg_compare import (BACKENDS, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges, features,
                         hazard_edges, pair)

F_IN = 4
MLPS = {
    "relu": lambda: Sequential(Linear(2 * F_IN, 8), ReLU(), Linear(8, 3)),
    "deep": lambda: Sequential(Linear(2 * F_IN, 8), LeakyReLU(0.1), Linear(8, 6, bias=False), Tanh(), Linear(6, 3),
                               ELU(0.5)),
    "one_linear": lambda: Linear(2 * F_IN, 3),
    "gelu_in_torch": lambda: Sequential(Linear(2 * F_IN, 8), GELU(), Linear(8, 3)),
}


def layers(mlp, backend=None, **kw):
    return pair(lambda: snn.EdgeConv(MLPS[mlp](), **kw), lambda: pnn.EdgeConv(MLPS[mlp](), **kw), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("aggr", ["max", "add", "mean"])
@pytest.mark.parametrize("mlp", sorted(MLPS))
def test_edge_index(mlp, aggr, backend):
    ours, theirs = layers(mlp, backend=backend, aggr=aggr)
    assert ours.path == ("torch" if mlp == "gelu_in_torch" else "program")
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("mlp", ["relu", "gelu_in_torch"])
def test_bipartite(mlp):
    ours, theirs = layers(mlp)
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, F_IN, seed=2))
    assert_same(ours, theirs, [x, bipartite_edges()])


def test_unknown_aggregation_is_refused():
    with pytest.raises(ValueError, match="aggr must be one of"):
        snn.EdgeConv(MLPS["relu"](), aggr="median")
