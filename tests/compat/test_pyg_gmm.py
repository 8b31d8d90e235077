"""GMMConv against PyG's: shared and separate Gaussians, each aggregation, without the root
term or the bias, bipartite inputs, and the errors."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar.nn as snn
from pyg_compare import (BACKENDS, DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges,
                         features, hazard_edges, pair)

F_IN, F_OUT, DIM, K = 4, 3, 2, 3


def layers(backend=None, **kw):
    return pair(lambda: snn.GMMConv(F_IN, F_OUT, DIM, K, **kw), lambda: pnn.GMMConv(F_IN, F_OUT, DIM, K, **kw),
                backend)


def pseudo(num_edges, seed=4):
    """Pseudo-coordinates in [0, 1), as PyG's Cartesian transform gives them."""
    return torch.rand(num_edges, DIM, generator=torch.Generator().manual_seed(seed), dtype=DT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
@pytest.mark.parametrize("aggr", ["mean", "add", "max", "min"])
def test_edge_index(aggr, separate, backend):
    ours, theirs = layers(backend=backend, aggr=aggr, separate_gaussians=separate)
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, pseudo(ei.shape[1])])


def test_without_bias():
    ours, theirs = layers(bias=False)
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, pseudo(ei.shape[1])])


def test_without_root_weight():
    """PyG's own layer fails with root_weight=False (its forward reads a root it never made): ours
    equals PyG's with the root's weight zeroed."""
    ours, _ = layers(root_weight=False)
    _, theirs = layers()
    with torch.no_grad():
        theirs.root.weight.zero_()
    ours.load_state_dict({k: v for k, v in theirs.state_dict().items() if not k.startswith("root.")})
    ei = hazard_edges()
    o_ours, _ = assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, pseudo(ei.shape[1])], load=False,
                            check_grads=False)
    assert ours.root is None and o_ours.shape == (NUM_NODES, F_OUT)


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_bipartite(separate):
    ours, theirs = layers(separate_gaussians=separate)
    ei = bipartite_edges()
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, F_IN, seed=2))
    assert_same(ours, theirs, [x, ei, pseudo(ei.shape[1])])


def test_bad_input_is_refused_by_name():
    ours, _ = layers()
    ei = hazard_edges()
    with pytest.raises(ValueError, match="edge_attr .* is required"):
        ours(features(NUM_NODES, F_IN), ei)
    with pytest.raises(ValueError, match=r"edge_attr must be \[E, dim\]"):
        ours(features(NUM_NODES, F_IN), ei, pseudo(ei.shape[1] - 1))
    with pytest.raises(ValueError, match="aggr must be one of"):
        snn.GMMConv(F_IN, F_OUT, DIM, K, aggr="lstm")
    with pytest.raises(ValueError, match="the layer was made for 4"):
        ours(features(NUM_NODES, F_IN + 1), ei, pseudo(ei.shape[1]))


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_lazy_widths_come_from_the_first_call_or_a_state_dict(separate):
    ei = hazard_edges()
    ours, theirs = layers(separate_gaussians=separate)
    lazy = snn.GMMConv(-1, F_OUT, DIM, K, separate_gaussians=separate).double()
    lazy(features(NUM_NODES, F_IN), ei, pseudo(ei.shape[1]))
    assert lazy.g.shape == ours.g.shape and lazy.mu.shape == ours.mu.shape and lazy.root.weight.shape[1] == F_IN
    lazy = snn.GMMConv(-1, F_OUT, DIM, K, separate_gaussians=separate).double()
    assert_same(lazy, theirs, [features(NUM_NODES, F_IN), ei, pseudo(ei.shape[1])])
