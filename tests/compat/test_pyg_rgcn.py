"""RGCNConv against PyG's: every path (mode) seastar chooses among, mean / sum, bases, blocks,
root and bias options, bipartite inputs, featureless input (None or indices), adj_t with the
relations as values."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar as ss
import seastar.nn as snn
from pyg_compare import NUM_DST, NUM_NODES, NUM_SRC, assert_same, bipartite_edges, features, hazard_edges, pair

F_IN, F_OUT, R = 4, 4, 4


def relations(num_edges: int) -> torch.Tensor:
    """Relations 0, 1 and 3 in turn: relation 2 has no edges."""
    return torch.tensor([(0, 1, 3)[i % 3] for i in range(num_edges)])


def layers(in_channels=F_IN, **kw):
    kw.setdefault("aggr", "mean")
    mode = kw.pop("mode", "auto")
    return pair(lambda: snn.RGCNConv(in_channels, F_OUT, R, mode=mode, **kw),
                lambda: pnn.RGCNConv(in_channels, F_OUT, R, **kw))


CONFS = {"full": {}, "bases": dict(num_bases=2), "blocks": dict(num_blocks=2)}


PATHS = [(conf, mode) for conf in sorted(CONFS) for mode in ("auto", "per_edge", "per_pair", "per_run", "per_basis")
         if mode != "per_basis" or conf == "bases"]


@pytest.mark.parametrize("aggr", ["mean", "sum", "add"])
@pytest.mark.parametrize("conf, mode", PATHS)
def test_paths(conf, mode, aggr):
    ours, theirs = layers(aggr=aggr, mode=mode, **CONFS[conf])
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, relations(ei.shape[1])])


@pytest.mark.parametrize("kw", [dict(root_weight=False), dict(bias=False), dict(is_sorted=True)],
                         ids=["no_root", "no_bias", "is_sorted"])
def test_options(kw):
    ours, theirs = layers(**kw)
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, relations(ei.shape[1])])


def test_reference_backend():
    ours, theirs = layers(num_bases=2)
    snn.set_backend(ours, "reference")
    ei = hazard_edges()
    assert_same(ours, theirs, [features(NUM_NODES, F_IN), ei, relations(ei.shape[1])])


@pytest.mark.parametrize("conf", sorted(CONFS))
def test_bipartite(conf):
    ours, theirs = layers((F_IN, 5), **CONFS[conf])
    ei = bipartite_edges()
    x = (features(NUM_SRC, F_IN), features(NUM_DST, 5, seed=1))
    out, _ = assert_same(ours, theirs, [x, ei, relations(ei.shape[1])])
    assert out.shape == (NUM_DST, F_OUT) and str(ours) == str(theirs) == "RGCNConv((4, 5), 4, num_relations=4)"


@pytest.mark.parametrize("conf", ["full", "bases"])
@pytest.mark.parametrize("aggr", ["mean", "sum"])
def test_featureless(conf, aggr):
    """x=None: vertex i is arange(in_channels)[i], so the graph has in_channels vertices."""
    ours, theirs = layers(in_channels=NUM_NODES, aggr=aggr, **CONFS[conf])
    ei = hazard_edges()
    t = relations(ei.shape[1])
    assert_same(ours, theirs, [None, ei, t])
    assert_same(ours, theirs, [torch.arange(NUM_NODES).flip(0), ei, t], load=False)
    bi = bipartite_edges()
    bt = relations(bi.shape[1])
    assert_same(ours, theirs, [(None, torch.arange(NUM_DST) + 2), bi, bt], load=False,
                call=lambda l, x, ei, t: l(x, ei, t), their_call=lambda l, x, ei, t: l((torch.arange(NUM_NODES), x[1]),
                                                                                       ei, t))


def test_featureless_blocks_is_an_error():
    with pytest.raises(ValueError, match="non-continuous"):
        snn.RGCNConv(NUM_NODES, F_OUT, R, num_blocks=2)(None, hazard_edges(), relations(hazard_edges().shape[1]))


def test_adjacency_values_are_relations():
    ours, _ = layers()
    ei = hazard_edges()
    t = relations(ei.shape[1])
    x = features(NUM_NODES, F_IN)
    order = torch.argsort(ei[1] * NUM_NODES + ei[0], stable=True)
    # a coalesced adj_t would merge the duplicate edges, so the duplicates go
    keep = torch.ones(ei.shape[1], dtype=torch.bool)
    pairs = (ei[1] * NUM_NODES + ei[0])[order]
    keep[order[1:][pairs[1:] == pairs[:-1]]] = False
    ei, t = ei[:, keep], t[keep]
    adj_t = torch.sparse_coo_tensor(ei.flip(0), t, (NUM_NODES, NUM_NODES)).coalesce()
    torch.testing.assert_close(ours(x, adj_t), ours(x, ei, t), rtol=1e-12, atol=1e-12)
    g = ss.Graph.from_edge_index(ei, num_nodes=NUM_NODES, edge_type=t, num_edge_types=R)
    torch.testing.assert_close(ours(g, x), ours(x, ei, t), rtol=1e-12, atol=1e-12)


def test_errors():
    ei = hazard_edges()
    x = features(NUM_NODES, F_IN)
    with pytest.raises(ValueError, match="edge_type"):
        snn.RGCNConv(F_IN, F_OUT, R)(x, ei)
    with pytest.raises(ValueError, match=r"edge_type must be in \[0, 4\)"):
        snn.RGCNConv(F_IN, F_OUT, R)(x, ei, torch.full((ei.shape[1],), 4))
