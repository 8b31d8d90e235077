"""GCNConv on sampled blocks: DGL's ``GraphConv(norm="both")`` over the block, written here in
plain torch (float64), forward and every gradient, on blocks with isolated destinations, hubs,
repeated edges and self loops; with and without the remaining self loops; what equals the
whole graph's GCN at the seeds and what does not; and the errors."""
from __future__ import annotations

import pytest
import torch

import seastar as ss
import seastar.nn as snn
from blocks import hazard_blocks

DT = torch.float64
BACKENDS = ["fused", "reference"]


def _cases():
    cases = hazard_blocks()
    # destination 0 has two loops (source 0 -> destination 0 twice), destination 1 one, and a
    # source beyond the destinations sends to every destination
    ei = torch.tensor([[0, 0, 1, 4, 4, 4, 2, 3], [0, 0, 1, 0, 1, 2, 0, 2]])
    cases.append(("repeated_loops", ei, 5, 3))
    return cases


CASES = _cases()
IDS = [c[0] for c in CASES]


def dgl_graph_conv_both(ei, ns, nd, x, weight, bias, self_loops):
    """DGL's ``GraphConv(norm="both", allow_zero_in_degree=True)`` on a block, in plain torch:
    ``out = D_dst^-1/2 A D_src^-1/2 (x W) + b`` with ``D_src`` the sources' out-degrees and
    ``D_dst`` the destinations' in-degrees in the block, each clamped to at least 1.
    ``self_loops``: first PyG's remaining loops, every destination ``v`` ending with exactly one
    edge from source ``v`` (its loop edges, if it had any, give way to that one)."""
    src, dst = ei
    if self_loops:
        keep = src != dst  # source v is destination v: these are the loops
        src = torch.cat([src[keep], torch.arange(nd)])
        dst = torch.cat([dst[keep], torch.arange(nd)])
    ones = torch.ones(src.numel(), dtype=x.dtype)
    out_deg = x.new_zeros(ns).index_add(0, src, ones).clamp(min=1)
    in_deg = x.new_zeros(nd).index_add(0, dst, ones).clamp(min=1)
    h = (x * out_deg.pow(-0.5).unsqueeze(-1)) @ weight.t()
    agg = h.new_zeros(nd, h.shape[1]).index_add(0, dst, h[src])
    return agg * in_deg.pow(-0.5).unsqueeze(-1) + bias


def _randomised(layer):
    torch.manual_seed(3)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p))
    return layer


def _compare(layer, block, ei, ns, nd, x, self_loops):
    out = layer(block, x)
    xr = x.detach().clone().requires_grad_(x.requires_grad)
    w = layer.lin.weight.detach().clone().requires_grad_()
    b = layer.bias.detach().clone().requires_grad_()
    ref = dgl_graph_conv_both(ei, ns, nd, xr, w, b, self_loops)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(out)
    ours = [layer.lin.weight, layer.bias] + ([x] if x.requires_grad else [])
    theirs = [w, b] + ([xr] if x.requires_grad else [])
    for a, e in zip(torch.autograd.grad(out, ours, g), torch.autograd.grad(ref, theirs, g)):
        torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("f_in,f_out,x_grad", [(3, 5, True), (6, 2, True), (3, 5, False), (6, 2, False)])
def test_block_equals_dgl_graph_conv(case, self_loops, backend, f_in, f_out, x_grad):
    """Both orders of ``A (x W)`` (the layer picks by widths and by whether x needs a gradient)."""
    _, ei, ns, nd = case
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    layer = _randomised(snn.GCNConv(f_in, f_out, add_self_loops=self_loops, backend=backend).to(DT))
    x = torch.randn(ns, f_in, dtype=DT, requires_grad=x_grad)
    _compare(layer, block, ei, ns, nd, x, self_loops)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_block_without_normalisation_is_a_weighted_sum(case):
    _, ei, ns, nd = case
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    layer = _randomised(snn.GCNConv(4, 3, normalize=False).to(DT))
    x = torch.randn(ns, 4, dtype=DT)
    w = torch.rand(ei.shape[1], dtype=DT)
    h = x @ layer.lin.weight.detach().t()
    ref = h.new_zeros(nd, 3).index_add(0, ei[1], h[ei[0]] * w.unsqueeze(-1)) + layer.bias.detach()
    torch.testing.assert_close(layer(block, x, w), ref, rtol=1e-12, atol=1e-12)
    ref = h.new_zeros(nd, 3).index_add(0, ei[1], h[ei[0]]) + layer.bias.detach()
    torch.testing.assert_close(layer(block, x), ref, rtol=1e-12, atol=1e-12)


def _symmetric_graph(n=40, m=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    return ss.Graph.from_edge_index(ei, num_nodes=n), ei


def test_full_fanout_block_against_the_whole_graph():
    """With every neighbour sampled (-1) a block's destinations have all their in-edges, so
    its destination factor is the whole graph's; its source factor counts only the edges into
    the batch's destinations. Hence: seeds = every vertex gives the whole graph's GCN (on a
    symmetric graph, where out- and in-degrees agree); a subset of seeds gives the whole
    graph's GCN with the sources' degrees taken in the block, which is not the whole graph's."""
    graph, ei = _symmetric_graph()
    n = graph.num_nodes
    layer = _randomised(snn.GCNConv(4, 3).to(DT))
    x = torch.randn(n, 4, dtype=DT)
    full = layer(graph, x)

    every = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    b = ss.loader.sample_blocks(graph, every, [-1])
    torch.testing.assert_close(layer(b.blocks[0], x[b.input_nodes]), full[every], rtol=1e-12, atol=1e-12)

    seeds = every[:7]
    b = ss.loader.sample_blocks(graph, seeds, [-1])
    block, nodes = b.blocks[0], b.input_nodes
    out = layer(block, x[nodes])
    w, bias = layer.lin.weight.detach(), layer.bias.detach()
    torch.testing.assert_close(out, dgl_graph_conv_both(block.edge_index, block.num_src, block.num_dst, x[nodes], w,
                                                        bias, True), rtol=1e-12, atol=1e-12)
    # the whole graph's GCN at the seeds: the same sums with each source's whole degree
    deg = graph.in_degrees().to(DT) + 1  # the graph has no loops; add_self_loops adds one
    src, dst = block.edge_index
    src, dst = torch.cat([src, torch.arange(block.num_dst)]), torch.cat([dst, torch.arange(block.num_dst)])
    h = (x[nodes] * deg[nodes].pow(-0.5).unsqueeze(-1)) @ w.t()
    whole = h.new_zeros(block.num_dst, 3).index_add(0, dst, h[src]) * deg[seeds].pow(-0.5).unsqueeze(-1) + bias
    torch.testing.assert_close(whole, full[seeds], rtol=1e-12, atol=1e-12)
    assert torch.equal(block.in_degrees() + 1, graph.in_degrees()[seeds] + 1)
    assert not torch.allclose(out, full[seeds])  # the sources' degrees differ


def test_global_source_block_equals_local_block():
    """NeighborLoader(x_in_place=True)'s first block: GCNConv gathers the rows it needs."""
    graph, _ = _symmetric_graph()
    layer = _randomised(snn.GCNConv(4, 3).to(DT))
    x = torch.randn(graph.num_nodes, 4, dtype=DT)
    b = ss.loader.sample_blocks(graph, torch.tensor([3, 9, 1]), [4], seed=5)
    glob = b.blocks[0].with_global_sources(b.input_nodes, graph.num_nodes)
    torch.testing.assert_close(layer(glob, x), layer(b.blocks[0], x[b.input_nodes]), rtol=0, atol=0)


def test_two_layers_on_sampled_blocks_train():
    graph, _ = _symmetric_graph(200, 800)
    x, y = torch.randn(200, 8), torch.randint(0, 3, (200,))
    convs = torch.nn.ModuleList([snn.GCNConv(8, 16), snn.GCNConv(16, 3)])
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    loader = ss.loader.NeighborLoader((graph, x, y), [5, 5], batch_size=50, prefetch=0)
    for b in loader:
        opt.zero_grad()
        h = torch.relu(convs[0](b.blocks[0], b.x))
        out = convs[1](b.blocks[1], h)
        assert out.shape == (b.batch_size, 3)
        torch.nn.functional.cross_entropy(out, b.y).backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in convs.parameters())
        opt.step()


def test_errors_on_blocks():
    block = ss.Graph.from_edge_index(torch.tensor([[0, 3], [1, 0]]), num_nodes=(4, 2))
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"x must be \[num_src, F\] = \[4, F\]"):
        snn.GCNConv(3, 2)(block, x[:3])
    with pytest.raises(ValueError, match="edge weights"):
        snn.GCNConv(3, 2)(block, x, torch.ones(2))
    with pytest.raises(ValueError, match="cached=True"):
        snn.GCNConv(3, 2, cached=True)(block, x)
    with pytest.raises(ValueError, match="x_dst has 3 rows"):
        snn.GCNConv(3, 2)(block, (x, x[:3]))
    wide = ss.Graph.from_edge_index(torch.tensor([[0], [2]]), num_nodes=(2, 3))
    with pytest.raises(ValueError, match="num_dst <= num_src"):
        snn.GCNConv(3, 2)(wide, torch.randn(2, 3))
    with pytest.raises(ValueError, match="K times"):
        snn.APPNP(K=2, alpha=0.1)(block, x)
    # PyG's bipartite call stays refused, as PyG's GCNConv refuses it
    with pytest.raises(ValueError, match="bipartite"):
        snn.GCNConv(3, 2)((x, x[:2]), torch.tensor([[0, 3], [1, 0]]))


@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("case", CASES[:3] + CASES[-1:], ids=IDS[:3] + IDS[-1:])
def test_block_runs_as_generated_cuda(case, self_loops, monkeypatch):
    """The CUDA kernels of the block programs, run by the host emulator: the source factor is
    read on the source side (num_src rows), the destination factor and the loop term on the
    destination side."""
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    test_block_equals_dgl_graph_conv(case, self_loops, "fused", 3, 5, True)
