"""HGTConv on bipartite blocks (sampled mini-batches of a graph with node and edge types).

A block's node types are its sources' (destination i is source i); the layer computes K and V
for the sources, Q, the output and the residual for the destinations. The expected values come
from a plain-torch HGT written here over the block's edge list (per relation, per head), in
float64, forward and the gradients of the features and every parameter.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
from blocks import hazard_blocks

T, R = 3, 3  # node types, relations
TOL = dict(rtol=1e-10, atol=1e-10)


BLOCKS = hazard_blocks()


def _types(n, k, seed):
    return torch.randint(0, k, (n,), generator=torch.Generator().manual_seed(seed))


def _typed_linear(x, nt, w, b):
    out = x.new_zeros(x.shape[0], w.shape[-1])
    for t in range(w.shape[0]):
        rows = torch.nonzero(nt == t).flatten()
        out = out.index_add(0, rows, x[rows] @ w[t] + b[t])
    return out


def ref_hgt_block(layer, ei, et, nt_src, x_src, x_dst):
    """HGT over a bipartite edge list in plain torch: loops over relations and heads, the
    softmax over every in-edge of a destination by a scatter max and index_add."""
    src, dst = ei
    ns, nd, H, C = x_src.shape[0], x_dst.shape[0], layer.heads, layer.out_channels
    d = C // H
    nt_dst = nt_src[:nd]
    k = _typed_linear(x_src, nt_src, layer.k_weight, layer.k_bias).view(ns, H, d)
    v = _typed_linear(x_src, nt_src, layer.v_weight, layer.v_bias).view(ns, H, d)
    q = _typed_linear(x_dst, nt_dst, layer.q_weight, layer.q_bias).view(nd, H, d)
    E = src.numel()
    score, msg = x_src.new_zeros(E, H), x_src.new_zeros(E, H, d)
    for r in range(layer.num_edge_types):
        ids = torch.nonzero(et == r).flatten()
        for h in range(H):
            at = (ids, torch.full_like(ids, h))
            s = ((k[src[ids], h] @ layer.k_rel[r, h]) * q[dst[ids], h]).sum(-1) * layer.p_rel[r, h] / math.sqrt(d)
            score = score.index_put(at, s)
            msg = msg.index_put(at, v[src[ids], h] @ layer.v_rel[r, h])
    with torch.no_grad():
        mx = x_src.new_zeros(nd, H).scatter_reduce(0, dst.unsqueeze(-1).expand(E, H), score, "amax",
                                                   include_self=False)
    ex = torch.exp(score - mx[dst])
    alpha = ex / x_src.new_zeros(nd, H).index_add(0, dst, ex)[dst]
    agg = x_src.new_zeros(nd, H, d).index_add(0, dst, alpha.unsqueeze(-1) * msg).reshape(nd, C)
    out = _typed_linear(F.gelu(agg), nt_dst, layer.a_weight, layer.a_bias)
    if layer.in_channels == C:
        beta = torch.sigmoid(layer.skip)[nt_dst].unsqueeze(-1)
        out = beta * out + (1 - beta) * x_dst
    return out


def _layer(fin, fout, heads, mode, backend, seed=0):
    torch.manual_seed(seed)
    layer = ss.nn.HGTConv(fin, fout, T, R, heads=heads, mode=mode, backend=backend).double()
    with torch.no_grad():  # away from the initial values (p_rel, skip all ones; zero biases)
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return layer


@pytest.mark.parametrize("backend", ["fused", "reference"])
@pytest.mark.parametrize("mode", ["per_edge", "per_pair"])
@pytest.mark.parametrize("heads, fin, fout, pair", [(2, 4, 4, False), (1, 3, 4, True)],
                         ids=["2heads-skip-x", "1head-noskip-pair"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_hgt_on_a_typed_block_matches_torch(case, heads, fin, fout, pair, mode, backend):
    _, ei, ns, nd = case
    et, nt = _types(ei.shape[1], R, 3), _types(ns, T, 4)
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd), edge_type=et, num_edge_types=R, node_type=nt,
                                     num_node_types=T)
    layer = _layer(fin, fout, heads, mode, backend)
    gen = torch.Generator().manual_seed(2)
    x_src = torch.randn(ns, fin, generator=gen, dtype=torch.float64, requires_grad=True)
    # x: the sources' rows (the destinations are the first num_dst); a pair: separate destination rows
    x_dst = torch.randn(nd, fin, generator=gen, dtype=torch.float64, requires_grad=True) if pair else None
    out = layer(block, (x_src, x_dst) if pair else x_src)
    ref = ref_hgt_block(layer, ei, et, nt, x_src, x_dst if pair else x_src[:nd])
    assert out.shape == (nd, fout)
    torch.testing.assert_close(out, ref, **TOL)
    inputs = [x_src] + ([x_dst] if pair else []) + list(layer.parameters())
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    got = torch.autograd.grad((out * weight).sum(), inputs, allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), inputs, allow_unused=True)
    for i, (g_, e_) in enumerate(zip(got, exp)):
        if g_ is None or e_ is None:  # a parameter no path reads (no edges): both must agree it is zero
            assert (g_ is None or not g_.any()) and (e_ is None or not e_.any()), f"gradient {i}"
            continue
        torch.testing.assert_close(g_, e_, **TOL, msg=lambda m: f"gradient {i}: {m}")


def test_hgt_on_sampled_blocks_equals_the_square_graph_restricted():
    """Blocks sampled from a typed graph carry the sources' node types and the edges' types; a
    two-layer HGT over blocks sampled with every neighbour equals the full-graph HGT at the seeds."""
    ds = ss.datasets.planted_typed_classification(300, 2400, T, R, 4, 6, seed=5, dtype=torch.float64)
    g = ds.graph
    seeds = torch.tensor([3, 17, 42, 99, 250])
    batch = ss.loader.sample_blocks(g, seeds, [-1, -1])
    for block, nodes in zip(batch.blocks, batch.src_nodes):
        assert block.has_node_types and block.num_node_types == T
        torch.testing.assert_close(block.node_type.long(), g.node_type.long()[nodes], rtol=0, atol=0)
    convs = [_layer(6, 6, 2, "auto", None, seed=s) for s in (0, 1)]
    h = ds.x[batch.input_nodes]
    for conv, block in zip(convs, batch.blocks):
        h = conv(block, h)
    full = convs[1](g, convs[0](g, ds.x))[seeds]
    torch.testing.assert_close(h, full, **TOL)


def test_bipartite_node_types_are_the_sources():
    ei = torch.tensor([[0, 4, 2], [1, 0, 1]])
    g = ss.Graph.from_edge_index(ei, num_nodes=(5, 2), node_type=torch.tensor([0, 2, 1, 1, 0]))
    assert (g.has_node_types, g.num_node_types) == (True, 3)
    assert "node_types=3" in repr(g)
    import pickle
    h = pickle.loads(pickle.dumps(g))
    assert torch.equal(h.node_type, g.node_type) and (h.num_src, h.num_dst) == (5, 2)
    with pytest.raises(ValueError, match="node_type has 2 entries but the graph has 5 sources"):
        ss.Graph.from_edge_index(ei, num_nodes=(5, 2), node_type=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="num_dst=6 > num_src=5"):
        ss.Graph.from_edge_index(ei, num_nodes=(5, 6), node_type=torch.zeros(5, dtype=torch.long))


def test_hgt_block_errors():
    ei = torch.tensor([[0, 4, 2], [1, 0, 1]])
    block = ss.Graph.from_edge_index(ei, num_nodes=(5, 2), edge_type=torch.tensor([0, 1, 2]), num_edge_types=R,
                                     node_type=torch.tensor([0, 2, 1, 1, 0]), num_node_types=T)
    layer = ss.nn.HGTConv(4, 4, T, R, heads=2)
    with pytest.raises(ValueError, match="4 sources and 2 destinations but the graph has 5 sources"):
        layer(block, torch.randn(4, 4))
    with pytest.raises(ValueError, match="x_dst must be"):
        layer(block, (torch.randn(5, 4), torch.randn(2, 3)))
    with pytest.raises(ValueError, match="a pair"):
        layer(block, (torch.randn(5, 4),))
    with pytest.raises(ValueError, match="node types"):
        ss.nn.HGTConv(4, 4, T + 1, R)(block, torch.randn(5, 4))


@pytest.mark.parametrize("heads, fout, want", [(1, 10, "hgt_typed"), (4, 64, "hgt_pairs")],
                         ids=["1head-narrow-per_edge", "4heads-per_pair"])
def test_compiled_auto_takes_the_path_typical_of_a_block_and_equals_torch(heads, fout, want):
    """Compiled ``mode="auto"`` chooses by the cost model on a block of typical sizes (never by the
    sizes it is given): a narrow single-head layer the per-edge program, several heads the pairs;
    either equals plain torch."""
    _, ei, ns, nd = BLOCKS[0]
    et, nt = _types(ei.shape[1], R, 3), _types(ns, T, 4)
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd), edge_type=et, num_edge_types=R, node_type=nt,
                                     num_node_types=T)
    layer = _layer(6, fout, heads, "auto", None)
    programs = []

    def recording(gm, example_inputs):
        programs.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    x = torch.randn(ns, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    out = torch.compile(layer, fullgraph=True, backend=recording)(block, x)
    assert programs and want in programs[0] and ({"hgt_typed", "hgt_pairs"} - {want}).pop() not in programs[0]
    torch.testing.assert_close(out, ref_hgt_block(layer, ei, et, nt, x, x[:nd]), **TOL)
