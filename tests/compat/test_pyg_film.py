"""FiLMConv against PyG's: one relation with each aggregation, several relations (a mean per
relation, summed), activations in the program and in torch, bipartite inputs, a typed graph's
own edge types, and the errors."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar as ss
import seastar.nn as snn
from pyg_compare import (BACKENDS, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges, features,
                         hazard_edges, pair)

F_IN, F_OUT, R = 4, 3, 3


def layers(backend=None, in_channels=F_IN, **kw):
    return pair(lambda: snn.FiLMConv(in_channels, F_OUT, **kw), lambda: pnn.FiLMConv(in_channels, F_OUT, **kw),
                backend)


def edge_types(num_edges, seed=3):
    return torch.randint(0, R, (num_edges,), generator=torch.Generator().manual_seed(seed))


ACTS = {"relu": lambda: torch.nn.ReLU(), "none": lambda: None, "leaky": lambda: torch.nn.LeakyReLU(0.3),
        "gelu_in_torch": lambda: torch.nn.GELU()}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_one_relation(aggr, act, backend):
    ours, theirs = layers(backend=backend, aggr=aggr, act=ACTS[act]())
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), hazard_edges()])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("aggr", ["mean", "add"])
def test_several_relations(aggr, act, backend):
    ours, theirs = layers(backend=backend, num_relations=R, aggr=aggr, act=ACTS[act]())
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, edge_types(ei.shape[1])])


def test_an_nn_for_the_film_terms():
    nn = torch.nn.Sequential(torch.nn.Linear(F_IN, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2 * F_OUT))
    ours, theirs = layers(num_relations=R, nn=nn)
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, edge_types(ei.shape[1])])


@pytest.mark.parametrize("num_relations", [1, R])
def test_bipartite(num_relations):
    ours, theirs = layers(in_channels=(F_IN, F_IN + 1), num_relations=num_relations)
    ei = bipartite_edges()
    x = (features(NUM_SRC, F_IN, seed=1), features(NUM_DST, F_IN + 1, seed=2))
    assert_same(ours, theirs, [x, ei, edge_types(ei.shape[1])])


def test_a_typed_graph_gives_the_edge_types():
    ours, theirs = layers(num_relations=R)
    ei = hazard_edges()
    et = edge_types(ei.shape[1])
    graph = ss.Graph.from_edge_index(ei, num_nodes=NUM_NODES, edge_type=et, num_edge_types=R)
    assert_same(ours, theirs, [features(NUM_NODES, F_IN)], call=lambda layer, x: layer(graph, x),
                their_call=lambda layer, x: layer(x, ei, et))


def test_bad_input_is_refused_by_name():
    ours, _ = layers(num_relations=R)
    ei = hazard_edges()
    x = features(NUM_NODES, F_IN)
    with pytest.raises(ValueError, match="needs edge_type"):
        ours(x, ei)
    with pytest.raises(ValueError, match=r"edge_type must be in \[0, 3\)"):
        ours(x, ei, edge_types(ei.shape[1]) + R)
    with pytest.raises(ValueError, match="integer relation ids"):
        ours(x, ei, edge_types(ei.shape[1]).double())
    with pytest.raises(ValueError, match="one relation only"):
        snn.FiLMConv(F_IN, F_OUT, num_relations=R, aggr="max")
    with pytest.raises(ValueError, match="aggr must be one of"):
        snn.FiLMConv(F_IN, F_OUT, aggr="lstm")
