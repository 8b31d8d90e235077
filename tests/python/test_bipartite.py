"""Bipartite graphs (sampled blocks): a program on a block equals the program on the square
graph with the same edges, restricted to the destinations, forward and every gradient.

A block has num_src sources and num_dst <= num_src destinations, destination i being source i.
Its square twin has num_src vertices and the same edge list, so vertices >= num_dst have no
in-edges. Tensors read at sources have num_src rows in both; tensors read only at the centre
have num_dst rows on the block (the twin gets them padded with unrelated rows, never read by
the kept outputs). The expected values come from the independent plain-torch versions of
models.py evaluated on the twin, and the reference backend must agree too.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from blocks import hazard_blocks
from models import MODELS

# which vertex inputs a model reads only at the centre (num_dst rows on a block)
CENTRE_ONLY = {"gcn": set(), "gat": {"er"}, "sage_mean": set(), "gin": set(), "appnp_step": {"h0"},
               "max_agg": set(), "min_agg": set(), "reuse_agg": set(), "rgcn": set()}
# out-edge programs aggregate at the sources: every output row is kept, h is read at destinations
OUT_EDGE = {"out_edges": {"h"}}


BLOCKS = hazard_blocks()


def _typed(ei, seed=3):
    return torch.randint(0, 3, (ei.shape[1],), generator=torch.Generator().manual_seed(seed))


def _pair(model, name, ei, ns, nd, dtype, backend, seed=0):
    typed = model.typed
    et = _typed(ei) if typed else None
    kw = dict(edge_type=et, num_edge_types=3) if typed else {}
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd), **kw)
    square = ss.Graph.from_edge_index(ei, num_nodes=ns, **kw)
    inputs = model.make_inputs(square, seed=seed, dtype=dtype, ties=True)
    sq = {k: t.clone().requires_grad_() for k, t in inputs.items()}
    dst_only = OUT_EDGE.get(model.name, CENTRE_ONLY.get(model.name, set()))
    bl = {k: (t[:nd] if k in dst_only else t).detach().clone().requires_grad_() for k, t in inputs.items()}
    out = model.program(block, backend=backend, **bl)
    ref = model.torch_fn(square, **sq)
    if model.name not in OUT_EDGE:
        ref = ref[:nd]
    return out, ref, bl, sq, dst_only


@pytest.mark.parametrize("backend", ["fused", "reference"])
@pytest.mark.parametrize("model_name", list(CENTRE_ONLY) + list(OUT_EDGE))
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_block_equals_square_restricted(model_name, case, backend):
    model = MODELS[model_name]
    name, ei, ns, nd = case
    out, ref, bl, sq, dst_only = _pair(model, name, ei, ns, nd, torch.float64, backend)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    names = sorted(bl)
    got = torch.autograd.grad((out * weight).sum(), [bl[k] for k in names], allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), [sq[k] for k in names], allow_unused=True)
    for k, g_, e_ in zip(names, got, exp):
        g_ = torch.zeros_like(bl[k]) if g_ is None else g_
        e_ = torch.zeros_like(sq[k]) if e_ is None else e_
        if k in dst_only:
            e_ = e_[:nd]
        torch.testing.assert_close(g_, e_, rtol=1e-10, atol=1e-10, msg=lambda m: f"d/d{k}: {m}")


def test_float32_block_matches_float64():
    model = MODELS["gat"]
    _, ei, ns, nd = BLOCKS[0]
    out32, ref, *_ = _pair(model, "random", ei, ns, nd, torch.float32, "fused")
    torch.testing.assert_close(out32.double(), ref.double(), rtol=1e-5, atol=1e-5)


def test_graph_sizes_and_errors():
    ei = torch.tensor([[0, 4, 2], [1, 0, 1]])
    g = ss.Graph.from_edge_index(ei, num_nodes=(5, 2))
    assert (g.num_src, g.num_dst, g.num_edges, g.is_bipartite) == (5, 2, 3, True)
    assert g.in_degrees().tolist() == [1, 2]
    assert g.out_degrees().tolist() == [1, 0, 1, 0, 1]
    with pytest.raises(ValueError, match="num_src or num_dst"):
        g.num_nodes
    with pytest.raises(ValueError, match=r"dst\[0\] = 1 is out of range.*num_dst = 1"):
        ss.Graph.from_edge_index(ei, num_nodes=(5, 1))
    with pytest.raises(ValueError, match=r"src\[1\] = 4 is out of range.*num_src = 4"):
        ss.Graph.from_edge_index(ei, num_nodes=(4, 2))
    with pytest.raises(ValueError, match=r"\(num_src, num_dst\)"):
        ss.Graph.from_edge_index(ei, num_nodes=(5, 2, 1))
    sq = ss.Graph.from_edge_index(ei, num_nodes=5)
    assert not sq.is_bipartite and sq.num_src == sq.num_dst == 5


def test_rows_are_checked_per_side():
    g = ss.Graph.from_edge_index(torch.tensor([[0, 4, 2], [1, 0, 1]]), num_nodes=(5, 2))
    gat = MODELS["gat"].program
    h, el = torch.randn(5, 2, 3, dtype=torch.float64), torch.randn(5, 2, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="'er' has 5 rows but the graph has 2 destinations"):
        gat(g, h=h, el=el, er=torch.randn(5, 2, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="'h' has 2 rows but the graph has 5 sources"):
        gat(g, h=h[:2], el=el, er=el[:2])


def test_read_at_both_ends_needs_destinations_among_sources():
    g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [2, 3]]), num_nodes=(2, 4))
    with pytest.raises(ValueError, match="num_dst=4 <= num_src=2"):
        MODELS["sage_mean"].program(g, h=torch.randn(2, 3, dtype=torch.float64))


def test_centre_reads_of_aggregations_work_on_blocks():
    @ss.vertex_program
    def reads_agg_at_centre(v):
        return ss.sum(e.src.h for e in v.in_edges())

    g = ss.Graph.from_edge_index(torch.tensor([[0, 3], [1, 0]]), num_nodes=(4, 2))
    assert reads_agg_at_centre(g, h=torch.randn(4, 2)).shape == (2, 2)
    from models import reuse_agg  # reads an aggregation at the centre inside a second traversal
    assert reuse_agg(g, h=torch.randn(4, 2), w=torch.randn(2, 1)).shape == (2, 2)


def test_one_trace_for_many_block_sizes():
    @ss.vertex_program
    def mean_plus_root(v):
        return ss.mean(e.src.h for e in v.in_edges()) + v.h

    gen = torch.Generator().manual_seed(0)
    for i in range(40):
        ns = 5 + i
        nd = 1 + i % 5
        e = 3 * i + 1
        ei = torch.stack([torch.randint(0, ns, (e,), generator=gen), torch.randint(0, nd, (e,), generator=gen)])
        g = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
        h = torch.randn(ns, 4, requires_grad=True)
        mean_plus_root(g, h=h).sum().backward()
    assert mean_plus_root.num_traces == 1


def test_square_graphs_of_many_sizes_share_a_trace():
    @ss.vertex_program
    def agg(v):
        return ss.sum(e.src.h * e.w for e in v.in_edges())

    for n in range(2, 30):
        ei = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
        g = ss.Graph.from_edge_index(ei, num_nodes=n)
        agg(g, h=torch.randn(n, 3), w=torch.randn(n, 1))
    assert agg.num_traces == 1


def test_parameters_of_other_shapes_retrace():
    @ss.vertex_program
    def lin(v, W):
        return ss.sum(e.src.h @ W for e in v.in_edges())

    g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    assert lin(g, h=torch.randn(2, 3), W=torch.randn(3, 4)).shape == (2, 4)
    assert lin(g, h=torch.randn(2, 3), W=torch.randn(3, 4)).shape == (2, 4)
    assert lin.num_traces == 1
    with pytest.raises(ss.TraceError):
        lin(g, h=torch.randn(2, 3), W=torch.randn(5, 4))  # inner dimensions disagree: traced anew, rejected


def test_pickle_round_trip():
    import pickle
    for g in (ss.Graph.from_edge_index(torch.tensor([[0, 4, 2], [1, 0, 1]]), num_nodes=(5, 2)),
              ss.Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=4,
                                       edge_type=torch.tensor([0, 1, 0]), num_edge_types=2)):
        h = pickle.loads(pickle.dumps(g))
        assert (h.num_src, h.num_dst, h.is_bipartite, h.num_edge_types) == (g.num_src, g.num_dst, g.is_bipartite,
                                                                              g.num_edge_types)
        assert torch.equal(h.edge_index, g.edge_index)
        if g.has_edge_types:
            assert torch.equal(h.edge_type, g.edge_type)


@pytest.mark.parametrize("model_name", ["gat", "sage_mean", "appnp_step", "out_edges", "rgcn", "reuse_agg"])
@pytest.mark.parametrize("case", BLOCKS[:3], ids=[c[0] for c in BLOCKS[:3]])
def test_block_runs_as_generated_cuda(model_name, case, monkeypatch):
    """The CUDA kernels on a block, run by the host emulator (SEASTAR_CUDA_EMULATE=1): the source-
    side launches must use Args::NS."""
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    test_block_equals_square_restricted(model_name, case, "fused")


def _rgcn_torch(layer, ei, et, x_src, x_dst, num_dst, aggr):
    """R-GCN in plain torch: x_dst @ root + bias + sum over relations r of the (mean or sum over
    in-edges of relation r) of x_src[src] @ W_r, one output row per destination."""
    src, dst = ei
    w = layer.weight if layer.num_bases is None else torch.einsum("rb,bio->rio", layer.comp, layer.weight)
    msg = torch.bmm(x_src[src].unsqueeze(1), w[et]).squeeze(1)  # [E, out]
    if aggr == "mean":
        key = dst * layer.num_relations + et
        count = torch.bincount(key, minlength=num_dst * layer.num_relations).to(msg.dtype)
        msg = msg / count[key].unsqueeze(1)
    out = torch.zeros(num_dst, msg.shape[1], dtype=msg.dtype).index_add(0, dst, msg)
    return out + x_dst @ layer.root + layer.bias


@pytest.mark.parametrize("mode", ["per_edge", "per_pair", "per_run", "per_basis"])
@pytest.mark.parametrize("aggr", ["mean", "add"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_rgcn_layer_on_a_typed_block(case, aggr, mode):
    """RGCNConv takes a typed block (a sampled mini-batch keeps its relations) with x of the
    sources' rows, forward and every gradient equal to plain torch over the block's edges."""
    _, ei, ns, nd = case
    et = _typed(ei)
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd), edge_type=et, num_edge_types=3)
    torch.manual_seed(0)
    layer = ss.nn.RGCNConv(4, 5, 3, aggr=aggr, mode=mode, num_bases=2 if mode == "per_basis" else None).double()
    x = torch.randn(ns, 4, dtype=torch.float64, requires_grad=True)
    out = layer(block, x)
    params = [p for p in layer.parameters()]
    ref_x = x.detach().clone().requires_grad_()
    ref = _rgcn_torch(layer, ei, et, ref_x, ref_x[:nd], nd, aggr)
    assert out.shape == (nd, 5)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    # allow_unused: without edges, per_pair reads no relation weight (its gradient is None, i.e. zero)
    got = torch.autograd.grad((out * weight).sum(), [x] + params, allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), [ref_x] + params)
    for i, (g_, e_) in enumerate(zip(got, exp)):
        g_ = torch.zeros_like(e_) if g_ is None else g_
        torch.testing.assert_close(g_, e_, rtol=1e-10, atol=1e-10, msg=lambda m: f"gradient {i}: {m}")
    with pytest.raises(ValueError, match=f"{ns - 1} sources.* {ns} sources"):
        layer(block, x[:-1])
