"""Mini-batch training reaches full-graph accuracy: GraphSAGE on Cora with fanouts [25, 10]
against the same model trained on the whole graph, mean test accuracy over 5 seeds."""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

import seastar as ss

EPOCHS = 50


def _model(f_in, classes, seed):
    torch.manual_seed(seed)
    return torch.nn.ModuleList([ss.nn.SAGEConv(f_in, 64), ss.nn.SAGEConv(64, classes)])


def _forward(convs, graphs, x, training):
    h = F.dropout(F.relu(convs[0](graphs[0], x)), 0.5, training)
    return convs[1](graphs[1], h)


def _test_accuracy(convs, ds, x):
    convs.eval()
    out = ss.loader.layerwise_inference(convs, ds.graph, x, 1024, between=lambda i, h: F.relu(h))
    m = ds.test_mask
    return (out[m].argmax(-1) == ds.y[m]).float().mean().item()


def _train(ds, x, seed, minibatch):
    convs = _model(x.shape[1], ds.num_classes, seed)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01, weight_decay=5e-4)
    loader = ss.loader.NeighborLoader(ds, num_neighbors=[25, 10], batch_size=70, input_nodes=ds.train_mask,
                                      seed=seed, prefetch=1)
    for _ in range(EPOCHS):
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
