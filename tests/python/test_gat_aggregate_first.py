"""GATConv's aggregate-first path: on a graph with many more sources than destinations (a
sampled block) it aggregates the input rows per head and projects after, ``(sum_e alpha_e x_j)
W_h``. The value is the same as projecting every source first; forward and every gradient are
checked against plain torch and against the project-first path, float64, on blocks with isolated
destinations, repeated neighbours, a hub and no edges."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
from blocks import hazard_blocks

TOL = dict(rtol=1e-10, atol=1e-10)


BLOCKS = hazard_blocks()


def _randomise(conv, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return conv


def ref_gat(conv, ei, x_src, x_dst):
    """GAT in plain torch over a bipartite edge list (no self loops added): project, score,
    softmax over each destination's in-edges by a scatter max and index_add, sum."""
    src, dst = ei
    H, C, nd = conv.heads, conv.out_channels, x_dst.shape[0]
    h = (x_src @ conv.lin.weight.t()).view(-1, H, C)
    hd = (x_dst @ conv.lin.weight.t()).view(-1, H, C)
    score = F.leaky_relu((h * conv.att_src).sum(-1)[src] + (hd * conv.att_dst).sum(-1)[dst], conv.negative_slope)
    E = src.numel()
    with torch.no_grad():
        mx = score.new_zeros(nd, H).scatter_reduce(0, dst.unsqueeze(-1).expand(E, H), score, "amax",
                                                   include_self=False)
    ex = torch.exp(score - mx[dst])
    alpha = ex / score.new_zeros(nd, H).index_add(0, dst, ex)[dst]
    out = score.new_zeros(nd, H, C).index_add(0, dst, alpha.unsqueeze(-1) * h[src])
    out = out.reshape(nd, H * C) if conv.concat else out.mean(1)
    return out + conv.bias


def _grads(out, inputs):
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    return torch.autograd.grad((out * w).sum(), inputs, allow_unused=True)


@pytest.mark.parametrize("heads, concat", [(3, True), (2, False)])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_aggregate_first_matches_torch(case, heads, concat):
    _, ei, ns, nd = case
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    conv = _randomise(ss.nn.GATConv(6, 4, heads=heads, concat=concat, add_self_loops=False).double(), 2)
    conv.aggregate_first = True
    x = torch.randn(ns, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    out = conv(block, x)
    ref = ref_gat(conv, ei, x, x[:nd])
    torch.testing.assert_close(out, ref, **TOL)
    inputs = [x] + list(conv.parameters())
    for i, (g, e) in enumerate(zip(_grads(out, inputs), _grads(ref, inputs))):
        g = torch.zeros_like(e) if g is None else g
        e = torch.zeros_like(g) if e is None else e
        torch.testing.assert_close(g, e, **TOL, msg=lambda m: f"gradient {i}: {m}")


@pytest.mark.parametrize("options", [
    dict(heads=4), dict(heads=2, concat=False, residual=True), dict(heads=2, dropout=0.4),
    dict(heads=2, edge_dim=3), dict(heads=1, add_self_loops=False)], ids=["4heads", "mean_residual", "dropout",
                                                                         "edge_dim", "no_loops"])
@pytest.mark.parametrize("pair", [False, True], ids=["x", "pair"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_both_paths_agree(case, options, pair):
    """Every option of the layer (self loops, residual, attention dropout with the same mask,
    edge features, separate source and destination projections) gives the same output and
    gradients on both paths."""
    _, ei, ns, nd = case
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(ns, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    x_dst = torch.randn(nd, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    ea = torch.randn(ei.shape[1], 3, dtype=torch.float64, generator=gen) if "edge_dim" in options else None
    conv = _randomise(ss.nn.GATConv((6, 5) if pair else 6, 4, **options).double(), 5)
    results = []
    for first in (False, True):
        conv.aggregate_first = first
        torch.manual_seed(9)  # the same dropout mask on both paths
        out = conv(block, (x, x_dst) if pair else x, ea)
        results.append((out, _grads(out, [x, x_dst] + list(conv.parameters()))))
    (o0, g0), (o1, g1) = results
    torch.testing.assert_close(o1, o0, **TOL)
    for i, (a, b) in enumerate(zip(g1, g0)):
        assert (a is None) == (b is None), f"gradient {i}"
        if a is not None:
            torch.testing.assert_close(a, b, **TOL, msg=lambda m: f"gradient {i}: {m}")


def test_the_cost_model_aggregates_first_on_blocks_only():
    ds = ss.datasets.synthetic_node_classification(5000, avg_degree=20, num_features=100, seed=0)
    batch = next(iter(ss.loader.NeighborLoader(ds, num_neighbors=[15, 10], batch_size=256, prefetch=0)))
    block = batch.blocks[0]
    conv = ss.nn.GATConv(100, 64, heads=4)
    assert conv._aggregates_first(block, batch.x, None)
    assert not conv._aggregates_first(ds.graph, ds.x, ds.x)  # every vertex is a source and a destination
    assert not conv._aggregates_first(ds.graph.edge_index, ds.x, ds.x)  # only on a seastar.Graph
    torch.manual_seed(0)
    auto = conv(block, batch.x)
    conv.aggregate_first = False
    torch.testing.assert_close(auto, conv(block, batch.x), rtol=1e-5, atol=1e-5)
