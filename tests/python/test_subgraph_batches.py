"""Every layer on NeighborLoader(subgraph=True)'s square subgraphs, unchanged: with every
neighbour sampled, a model's outputs at the seeds (the subgraph's first rows) and the gradients
of a loss on them equal the whole graph's, in float64, given enough hops: as many as layers
when a layer's output at a vertex reads only its in-edges, one more for GCNConv and APPNP,
whose normalisation reads the in-neighbours' degrees too (a vertex's degree in the subgraph is
its whole degree only if its own in-edges were sampled)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
import seastar.nn as snn

DT = torch.float64
N, F_IN = 60, 5


def _graph(typed=False):
    """A directed graph with repeated edges, a few self loops, a hub and isolated vertices."""
    g = torch.Generator().manual_seed(4)
    ei = torch.randint(0, N - 4, (2, 180), generator=g)  # the last 4 vertices: no edges
    ei = torch.cat([ei, torch.tensor([[5, 5, 8, 9] + list(range(20)), [6, 6, 8, 9] + [0] * 20])], dim=1)
    if not typed:
        return ss.Graph.from_edge_index(ei, num_nodes=N)
    return ss.Graph.from_edge_index(ei, num_nodes=N, node_type=torch.arange(N) % 3, num_node_types=3,
                                    edge_type=torch.randint(0, 4, (ei.shape[1],), generator=g), num_edge_types=4)


def _randomised(model):
    torch.manual_seed(1)
    model = model.to(DT)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return model


class Stack(torch.nn.Module):
    """Graph layers with tanh between them; a torch.nn.Linear (APPNP's predictor) reads x alone."""

    def __init__(self, *layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, graph, x):
        for i, layer in enumerate(self.layers):
            if isinstance(layer, torch.nn.Linear):
                x = layer(x)
                continue
            x = layer(graph, x)
            if i + 1 < len(self.layers):
                x = torch.tanh(x)
        return x


MODELS = {
    # name: (model, hops that make the seeds' outputs exact, typed graph)
    "gcn": (lambda: Stack(snn.GCNConv(F_IN, 3)), 2, False),
    "gcn2": (lambda: Stack(snn.GCNConv(F_IN, 4), snn.GCNConv(4, 3)), 3, False),
    "gcn_no_loops": (lambda: Stack(snn.GCNConv(F_IN, 3, add_self_loops=False)), 2, False),
    "appnp": (lambda: Stack(torch.nn.Linear(F_IN, 3), snn.APPNP(K=2, alpha=0.2)), 3, False),
    "sage2": (lambda: Stack(snn.SAGEConv(F_IN, 4), snn.SAGEConv(4, 3)), 2, False),
    "gat": (lambda: Stack(snn.GATConv(F_IN, 3, heads=2)), 1, False),
    "gin": (lambda: Stack(snn.GINConv(torch.nn.Linear(F_IN, 3))), 1, False),
    "rgcn": (lambda: Stack(snn.RGCNConv(F_IN, 3, 4)), 1, True),
    # in == out channels: the residual gate is used too
    "hgt": (lambda: Stack(snn.HGTConv(F_IN, F_IN, 3, 4, heads=1)), 1, True),
}


def _seed_outputs_and_grads(model, graph, x, rows):
    out = model(graph, x)[rows]
    loss = (out * torch.arange(1, out.numel() + 1, dtype=DT).view_as(out)).sum()
    return out, torch.autograd.grad(loss, list(model.parameters()))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_subgraph_with_enough_hops_equals_the_whole_graph_at_the_seeds(name):
    make, hops, typed = MODELS[name]
    graph = _graph(typed)
    x = torch.randn(N, F_IN, dtype=DT, generator=torch.Generator().manual_seed(2))
    model = _randomised(make())
    seeds = torch.tensor([0, 6, 8, 13, 57, 30])  # the hub, a repeated edge's head, a loop, an isolated vertex
    full, full_grads = _seed_outputs_and_grads(model, graph, x, seeds)
    loader = ss.loader.NeighborLoader((graph, x, None), [-1] * hops, batch_size=6, input_nodes=seeds,
                                      shuffle=False, subgraph=True, prefetch=0)
    (b,) = list(loader)
    out, grads = _seed_outputs_and_grads(model, b.graph, b.x, slice(0, b.batch_size))
    torch.testing.assert_close(out, full, rtol=1e-10, atol=1e-10)
    for a, e in zip(grads, full_grads):
        torch.testing.assert_close(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["gcn", "appnp"])
def test_gcn_normalisation_needs_the_extra_hop(name):
    """With as many hops as layers (steps) the seeds' in-neighbours have lost in-edges, so their
    degrees, and the seeds' outputs, differ from the whole graph's."""
    make, hops, _ = MODELS[name]
    graph = _graph()
    x = torch.randn(N, F_IN, dtype=DT, generator=torch.Generator().manual_seed(2))
    model = _randomised(make())
    seeds = torch.tensor([0, 6, 13])
    full = model(graph, x)[seeds]
    b = ss.loader.sample_subgraph(graph, seeds, [-1] * (hops - 1))
    out = model(b.graph, x[b.input_nodes])[:3]
    assert not torch.allclose(out, full)


def test_gcn_trains_on_subgraph_batches():
    graph = _graph()
    x, y = torch.randn(N, F_IN), torch.randint(0, 3, (N,))
    model = Stack(snn.GCNConv(F_IN, 8), snn.GCNConv(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for b in ss.loader.NeighborLoader((graph, x, y), [4, 3], batch_size=16, subgraph=True):
        opt.zero_grad()
        out = model(b.graph, b.x)[:b.batch_size]
        F.cross_entropy(out, b.y).backward()
        opt.step()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())
