"""PyG's ``EdgeIndex`` as the ``edge_index`` of every ``seastar.nn`` layer, against PyG's layers
on the same inputs: square and bipartite, sizes carried by the EdgeIndex alone (PyG's
``conv((x_src, None), edge_index)`` takes the destinations' count from it), sorted by
destination or not, forward and every gradient in float64. A sparse size that disagrees with the
features is one clear error naming both."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric import EdgeIndex

import seastar.nn as snn
from pyg_compare import (DT, NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges, features, hazard_edges,
                         pair, randomise, seeded)
from test_pyg_hetero import dict_call, hetero_data, hgt

F_IN = 5
R = 3  # relations of the typed layers


def square(sort: bool = False) -> EdgeIndex:
    ei = EdgeIndex(hazard_edges(), sparse_size=(NUM_NODES, NUM_NODES))
    return ei.sort_by("col")[0] if sort else ei


def bipartite(sizes=(NUM_SRC, NUM_DST), sort: bool = False) -> EdgeIndex:
    ei = EdgeIndex(bipartite_edges(), sparse_size=sizes)
    return ei.sort_by("col")[0] if sort else ei


def weights(num_edges: int) -> torch.Tensor:
    return torch.randn(num_edges, generator=torch.Generator().manual_seed(3), dtype=DT)


def relations(num_edges: int) -> torch.Tensor:
    return torch.randint(0, R, (num_edges,), generator=torch.Generator().manual_seed(4))


SQUARE = {  # layer: (ours, PyG's) factories
    "gcn": (lambda: snn.GCNConv(F_IN, 4), lambda: pnn.GCNConv(F_IN, 4)),
    "gat": (lambda: snn.GATConv(F_IN, 3, heads=2), lambda: pnn.GATConv(F_IN, 3, heads=2)),
    "sage": (lambda: snn.SAGEConv(F_IN, 4), lambda: pnn.SAGEConv(F_IN, 4)),
    "gin": (lambda: snn.GINConv(torch.nn.Linear(F_IN, 4), train_eps=True),
            lambda: pnn.GINConv(torch.nn.Linear(F_IN, 4), train_eps=True)),
    "graph": (lambda: snn.GraphConv(F_IN, 4, aggr="max"), lambda: pnn.GraphConv(F_IN, 4, aggr="max")),
    "appnp": (lambda: snn.APPNP(K=3, alpha=0.2), lambda: pnn.APPNP(K=3, alpha=0.2)),
}
BIPARTITE = {  # the layers PyG runs on (x_src, x_dst): (ours, PyG's, the destinations' width)
    "gat": (lambda: snn.GATConv((F_IN, 4), 3, heads=2, add_self_loops=False),
            lambda: pnn.GATConv((F_IN, 4), 3, heads=2, add_self_loops=False), 4),
    "sage": (lambda: snn.SAGEConv((F_IN, 4), 4), lambda: pnn.SAGEConv((F_IN, 4), 4), 4),
    "gin": (lambda: snn.GINConv(torch.nn.Linear(F_IN, 4)), lambda: pnn.GINConv(torch.nn.Linear(F_IN, 4)), F_IN),
    "graph": (lambda: snn.GraphConv((F_IN, 4), 4, aggr="mean"), lambda: pnn.GraphConv((F_IN, 4), 4, aggr="mean"),
              4),
}


@pytest.mark.parametrize("sort", [False, True], ids=["unsorted", "sorted_by_dst"])
@pytest.mark.parametrize("name", sorted(SQUARE))
def test_square_edge_index(name, sort):
    ours, theirs = pair(*SQUARE[name])
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), square(sort)])


@pytest.mark.parametrize("name", sorted(BIPARTITE))
def test_bipartite_edge_index(name):
    make_ours, make_theirs, dst_width = BIPARTITE[name]
    ours, theirs = pair(make_ours, make_theirs)
    x = (features(NUM_SRC, F_IN), features(NUM_DST, dst_width, seed=1))
    out, _ = assert_same(ours, theirs, [x, bipartite()])
    assert out.shape[0] == NUM_DST


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_destination_count_comes_from_the_edge_index(weighted):
    """PyG's own GraphConv test: ``conv((x_src, None), edge_index)`` on a bipartite EdgeIndex has
    as many rows as its sparse size's destinations, not as the sources."""
    ours, theirs = pair(lambda: snn.GraphConv((F_IN, 4), 6), lambda: pnn.GraphConv((F_IN, 4), 6))
    ei = bipartite(sort=weighted)
    inputs = [(features(NUM_SRC, F_IN), None), ei] + ([weights(ei.shape[1])] if weighted else [])
    out, _ = assert_same(ours, theirs, inputs)
    assert out.shape == (NUM_DST, 6)
    # the same with the size given as well, and with one of the two sizes left to the features
    explicit = assert_same(ours, theirs, inputs, load=False,
                           call=lambda layer, *a: layer(*a, size=(NUM_SRC, NUM_DST)))[0]
    torch.testing.assert_close(explicit, out, rtol=0, atol=0)
    half = [(features(NUM_SRC, F_IN), None), bipartite((None, NUM_DST))] + inputs[2:]
    assert assert_same(ours, theirs, half, load=False)[0].shape == (NUM_DST, 6)


@pytest.mark.parametrize("bipartite_graph", [False, True], ids=["square", "bipartite"])
def test_rgcn_edge_index(bipartite_graph):
    if bipartite_graph:
        ours, theirs = pair(lambda: snn.RGCNConv((F_IN, 4), 3, R), lambda: pnn.RGCNConv((F_IN, 4), 3, R))
        x, ei = (features(NUM_SRC, F_IN), features(NUM_DST, 4, seed=1)), bipartite()
    else:
        ours, theirs = pair(lambda: snn.RGCNConv(F_IN, 3, R), lambda: pnn.RGCNConv(F_IN, 3, R))
        x, ei = features(NUM_NODES, F_IN), square()
    assert_same(ours, theirs, [x, ei, relations(ei.shape[1])])


def test_hgt_and_hetero_conv_take_edge_index_dicts():
    data = hetero_data()
    sizes = {t: data[t].x.shape[0] for t in data.node_types}
    ei_dict = {et: EdgeIndex(data[et].edge_index, sparse_size=(sizes[et[0]], sizes[et[2]]))
               for et in data.edge_types}
    ours, theirs = hgt(-1)
    theirs(data.x_dict, data.edge_index_dict)  # materialise PyG's lazy weights
    randomise(theirs)
    inputs = [data[t].x for t in data.node_types] + [ei_dict[et] for et in data.edge_types]
    # PyG's HGTConv refuses EdgeIndex values (its combined graph keeps their per-type sizes): it
    # gets the plain tensors
    plain = lambda layer, *xs: dict_call(layer, *(x.as_tensor() if isinstance(x, EdgeIndex) else x for x in xs))  # noqa: E731
    assert_same(ours, theirs, inputs, call=dict_call, their_call=plain)

    convs = lambda lib: {et: lib.GraphConv((-1, -1), 4, aggr="mean") for et in data.edge_types}  # noqa: E731
    ours_h, theirs_h = seeded(lambda: snn.HeteroConv(convs(snn))).to(DT), seeded(lambda: pnn.HeteroConv(convs(pnn)))
    theirs_h = theirs_h.to(DT)
    theirs_h(data.x_dict, data.edge_index_dict)
    randomise(theirs_h)
    ours_h(data.x_dict, data.edge_index_dict)
    assert_same(ours_h, theirs_h, inputs, call=dict_call)


def test_a_sparse_size_that_disagrees_with_the_features_is_refused():
    x = (features(NUM_SRC, F_IN), features(NUM_DST, 4, seed=1))
    with pytest.raises(ValueError, match=r"sparse size is \(7, 5\)"):
        snn.GraphConv((F_IN, 4), 4)(x, bipartite((NUM_SRC, NUM_DST + 1)), size=(NUM_SRC, NUM_DST))
    with pytest.raises(ValueError, match=r"size 4 in dimension 0, but expected size 5"):
        snn.GraphConv((F_IN, 4), 4)(x, bipartite((NUM_SRC, NUM_DST + 1)))
    with pytest.raises(ValueError, match=r"EdgeIndex's sparse size is \(7, 5\)"):
        snn.RGCNConv((F_IN, 4), 3, R)(x, bipartite((NUM_SRC, NUM_DST + 1)), relations(bipartite_edges().shape[1]))
    data = hetero_data()
    ei_dict = dict(data.edge_index_dict)
    et = data.edge_types[0]
    ei_dict[et] = EdgeIndex(data[et].edge_index, sparse_size=(9, 9))
    with pytest.raises(ValueError, match="sparse size"):
        hgt(-1)[0](data.x_dict, ei_dict)
