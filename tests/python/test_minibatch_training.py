"""Mini-batch training reaches full-graph accuracy: GraphSAGE on Cora with fanouts [25, 10]
against the same model trained on the whole graph, mean test accuracy over 5 seeds; and R-GCN
and HGT on sampled typed blocks of a typed graph against the same layers on the whole graph."""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

import seastar as ss

EPOCHS = 50


def _model(f_in, classes, seed):
    torch.manual_seed(seed)
    return torch.nn.ModuleList([ss.nn.SAGEConv(f_in, 64), ss.nn.SAGEConv(64, classes)])


def _rgcn(num_relations):
    def make(f_in, classes, seed):
        torch.manual_seed(seed)
        return torch.nn.ModuleList([ss.nn.RGCNConv(f_in, 32, num_relations, aggr="add"),
                                    ss.nn.RGCNConv(32, classes, num_relations, aggr="add")])
    return make


def _hgt(num_node_types, num_relations):
    def make(f_in, classes, seed):
        torch.manual_seed(seed)
        return torch.nn.ModuleList([ss.nn.HGTConv(f_in, 32, num_node_types, num_relations, heads=2),
                                    ss.nn.HGTConv(32, classes, num_node_types, num_relations)])
    return make


def _forward(convs, graphs, x, training):
    h = F.dropout(F.relu(convs[0](graphs[0], x)), 0.5, training)
    return convs[1](graphs[1], h)


def _test_accuracy(convs, ds, x):
    convs.eval()
    out = ss.loader.layerwise_inference(convs, ds.graph, x, 1024, between=lambda i, h: F.relu(h))
    m = ds.test_mask
    return (out[m].argmax(-1) == ds.y[m]).float().mean().item()


def _train(ds, x, seed, minibatch, make=_model, batch_size=70, epochs=EPOCHS, weight_decay=5e-4):
    convs = make(x.shape[1], ds.num_classes, seed)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01, weight_decay=weight_decay)
    loader = ss.loader.NeighborLoader(ds, num_neighbors=[25, 10], batch_size=batch_size, input_nodes=ds.train_mask,
                                      seed=seed, prefetch=1)
    for _ in range(epochs):
        convs.train()
        if minibatch:
            for b in loader:
                opt.zero_grad()
                F.cross_entropy(_forward(convs, b.blocks, b.x, True), b.y).backward()
                opt.step()
        else:
            opt.zero_grad()
            out = _forward(convs, [ds.graph, ds.graph], x, True)
            F.cross_entropy(out[ds.train_mask], ds.y[ds.train_mask]).backward()
            opt.step()
    return _test_accuracy(convs, ds, x)


def test_cora_minibatch_matches_full_graph():
    ds = ss.datasets.load("cora")
    x = ds.x.to_dense() if ds.x.is_sparse else ds.x
    ds.x = x
    full = [_train(ds, x, s, minibatch=False) for s in range(5)]
    mini = [_train(ds, x, s, minibatch=True) for s in range(5)]
    print(f"full-graph {statistics.mean(full):.4f} {full}, mini-batch {statistics.mean(mini):.4f} {mini}")
    assert statistics.mean(full) > 0.7
    assert statistics.mean(mini) >= statistics.mean(full) - 0.015


def test_rgcn_on_sampled_typed_blocks_matches_full_graph():
    """The blocks sampled from a typed graph keep their relations, and RGCNConv trains on them
    (a planted graph: the class is in the relations of a vertex's in-edges; chance is 1/8)."""
    ds = ss.datasets.planted_typed_classification(5000, 50000, 3, 6, 8, 16, seed=3)
    make = _rgcn(ds.graph.num_edge_types)
    full = [_train(ds, ds.x, s, minibatch=False, make=make, epochs=30) for s in range(2)]
    mini = [_train(ds, ds.x, s, minibatch=True, make=make, batch_size=250, epochs=30) for s in range(2)]
    print(f"R-GCN full-graph {statistics.mean(full):.4f} {full}, mini-batch {statistics.mean(mini):.4f} {mini}")
    assert statistics.mean(full) > 0.8
    assert statistics.mean(mini) >= statistics.mean(full) - 0.03


def test_hgt_on_sampled_typed_blocks_matches_full_graph():
    """Blocks sampled from a graph with node and edge types carry both, and HGTConv trains on
    them (the planted graph of the R-GCN test; its node types carry no signal)."""
    ds = ss.datasets.planted_typed_classification(5000, 50000, 3, 6, 8, 16, seed=3)
    make = _hgt(ds.graph.num_node_types, ds.graph.num_edge_types)
    # one step per full-graph epoch against two per mini-batch epoch: the full graph gets more epochs
    full = [_train(ds, ds.x, s, minibatch=False, make=make, epochs=100, weight_decay=0) for s in range(2)]
    mini = [_train(ds, ds.x, s, minibatch=True, make=make, batch_size=250, epochs=30, weight_decay=0)
            for s in range(2)]
    print(f"HGT full-graph {statistics.mean(full):.4f} {full}, mini-batch {statistics.mean(mini):.4f} {mini}")
    assert statistics.mean(full) > 0.8
    assert statistics.mean(mini) >= statistics.mean(full) - 0.03
