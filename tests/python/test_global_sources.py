"""Blocks whose sources are global vertex ids (Graph.with_global_sources, NeighborLoader's
x_in_place): the first layer reads the whole feature table in place.

Layers on such a block must equal plain torch on the global edge list (source j of the local
block is row source_ids[j] of the table, destination i is row source_ids[i]), forward and every
gradient, float64, on the hazard blocks; the layers that cannot read in place equal the same
layer on the local block with the gathered rows. Everything that assumes destination i is
source i refuses such a block.
"""
from __future__ import annotations

import pickle

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
import seastar.nn._aggr as aggr_mod
from blocks import hazard_blocks
from models import MODELS
from seastar.loader import NeighborLoader

BLOCKS = hazard_blocks()
TABLE_ROWS = 40


def _global(case, seed=0):
    """(local block, global block, source_ids, global src and dst of every edge, table)."""
    _, ei, ns, nd = case
    ei = ei[:, torch.sort(ei[1], stable=True).indices]  # destination-major, as a sampled block (LSTM needs it)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randperm(TABLE_ROWS, generator=gen)[:ns]  # distinct rows, in no particular order
    local = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    glob = local.with_global_sources(ids, TABLE_ROWS)
    x = torch.randn(TABLE_ROWS, 5, generator=gen, dtype=torch.float64)
    return local, glob, ids, ids[ei[0]], ids[ei[1]], ei[1], x


def _torch_aggr(kind, rows, dst, nd):
    out = rows.new_zeros(nd, rows.shape[1])
    if kind in ("sum", "mean"):
        out = out.index_add(0, dst, rows)
        if kind == "mean":
            out = out / torch.bincount(dst, minlength=nd).clamp(min=1).to(rows.dtype).unsqueeze(1)
        return out
    red = "amax" if kind == "max" else "amin"
    return out.scatter_reduce(0, dst.unsqueeze(1).expand_as(rows), rows, reduce=red, include_self=False)


def _used_in_place(monkeypatch):
    seen = []
    real = aggr_mod.aggregate

    def spy(agg, s, *a, **kw):
        seen.append(s.graph.sources_global)
        return real(agg, s, *a, **kw)

    monkeypatch.setattr("seastar.nn.sage_conv.aggregate", spy)
    return seen


@pytest.mark.parametrize("kind", ["mean", "sum", "max", "min"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_sage_reads_the_table_in_place(case, kind, monkeypatch):
    local, glob, ids, gsrc, gdst, ldst, x = _global(case)
    nd = glob.num_dst
    torch.manual_seed(0)
    conv = ss.nn.SAGEConv(5, 7, aggr=kind).double()
    seen = _used_in_place(monkeypatch)
    out = conv(glob, x)
    assert seen == [True]  # no gather: the program ran on the global block
    wl, bl, wr = conv.lin_l.weight, conv.lin_l.bias, conv.lin_r.weight
    ref = _torch_aggr(kind, x[gsrc], ldst, nd) @ wl.t() + bl + x[ids[:nd]] @ wr.t()
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    gw = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    params = [wl, bl, wr]
    got = torch.autograd.grad((out * gw).sum(), params)
    exp = torch.autograd.grad((ref * gw).sum(), params)
    for g_, e_ in zip(got, exp):
        torch.testing.assert_close(g_, e_, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_a_table_that_needs_its_gradient_is_gathered(case, monkeypatch):
    """x.requires_grad (learnt embeddings): the gradient reaches exactly the rows the block read."""
    local, glob, ids, gsrc, gdst, ldst, x = _global(case)
    nd = glob.num_dst
    conv = ss.nn.SAGEConv(5, 7).double()
    seen = _used_in_place(monkeypatch)
    xt = x.clone().requires_grad_()
    out = conv(glob, xt)
    assert seen == [False]
    xr = x.clone().requires_grad_()
    ref = _torch_aggr("mean", xr[gsrc], ldst, nd) @ conv.lin_l.weight.t() + conv.lin_l.bias \
        + xr[ids[:nd]] @ conv.lin_r.weight.t()
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    gw = torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (got,) = torch.autograd.grad((out * gw).sum(), [xt])
    (exp,) = torch.autograd.grad((ref * gw).sum(), [xr])
    torch.testing.assert_close(got, exp, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_gin_reads_the_table_in_place(case):
    local, glob, ids, gsrc, gdst, ldst, x = _global(case)
    nd = glob.num_dst
    torch.manual_seed(0)
    conv = ss.nn.GINConv(torch.nn.Linear(5, 3).double(), train_eps=True).double()
    with torch.no_grad():
        conv.eps.fill_(0.25)
    out = conv(glob, x)
    ref = conv.nn(_torch_aggr("sum", x[gsrc], ldst, nd) + (1 + conv.eps) * x[ids[:nd]])
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    params = [conv.eps, *conv.nn.parameters()]
    gw = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for g_, e_ in zip(torch.autograd.grad((out * gw).sum(), params), torch.autograd.grad((ref * gw).sum(), params)):
        torch.testing.assert_close(g_, e_, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind, width", [("mean", 9), ("max", 10)])
@pytest.mark.parametrize("case", [BLOCKS[0], BLOCKS[2]], ids=["random", "hub"])
def test_the_generated_cuda_reads_the_table_in_place(case, kind, width, monkeypatch, tmp_path):
    """The CUDA kernels (run by the host emulation of SEASTAR_CUDA_EMULATE) index the table with
    the global ids: num_src is the table's row count, not the block's."""
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(tmp_path))
    local, glob, ids, gsrc, gdst, ldst, _ = _global(case)
    width += 2 * (case is BLOCKS[2])  # a width of its own: its kernels are compiled (and dumped) here
    x = torch.randn(TABLE_ROWS, width, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    torch.manual_seed(0)
    conv = ss.nn.SAGEConv(width, width + 1, aggr=kind).double()
    out = conv(glob, x)
    ref = _torch_aggr(kind, x[gsrc], ldst, glob.num_dst) @ conv.lin_l.weight.t() + conv.lin_l.bias \
        + x[ids[:glob.num_dst]] @ conv.lin_r.weight.t()
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    assert list(tmp_path.glob("*cudaemu.cpp")), "the emulated CUDA kernels did not run"
    gw = torch.randn(out.shape, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    params = list(conv.parameters())
    for g_, e_ in zip(torch.autograd.grad((out * gw).sum(), params), torch.autograd.grad((ref * gw).sum(), params)):
        torch.testing.assert_close(g_, e_, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layer", ["gat", "sage_project_first", "sage_project", "sage_lstm"])
@pytest.mark.parametrize("case", BLOCKS, ids=[c[0] for c in BLOCKS])
def test_other_layers_gather_and_match_the_local_block(case, layer, monkeypatch):
    local, glob, ids, *_, x = _global(case)
    torch.manual_seed(0)
    conv = {"gat": lambda: ss.nn.GATConv(5, 3, heads=2),  # adds self loops: destination i must be source i
            "sage_project_first": lambda: ss.nn.SAGEConv(5, 2),  # out < in: projects every source first
            "sage_project": lambda: ss.nn.SAGEConv(5, 7, project=True),
            "sage_lstm": lambda: ss.nn.SAGEConv(5, 7, aggr="lstm")}[layer]().double()
    if layer.startswith("sage"):
        seen = _used_in_place(monkeypatch)
    out = conv(glob, x)
    if layer.startswith("sage"):
        assert seen == [False]
    ref = conv(local, x[ids])
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    params = list(conv.parameters())
    gw = torch.randn(out.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    for g_, e_ in zip(torch.autograd.grad((out * gw).sum(), params), torch.autograd.grad((ref * gw).sum(), params)):
        torch.testing.assert_close(g_, e_, rtol=1e-10, atol=1e-10)


def test_the_destinations_rows_can_be_given():
    local, glob, ids, gsrc, gdst, ldst, x = _global(BLOCKS[0])
    conv = ss.nn.SAGEConv(5, 7).double()
    x_dst = torch.randn(glob.num_dst, 5, dtype=torch.float64)
    torch.testing.assert_close(conv(glob, (x, x_dst)), conv(local, (x[ids], x_dst)), rtol=1e-12, atol=1e-12)


def test_what_assumes_destination_i_is_source_i_refuses():
    local, glob, ids, *_, x = _global(BLOCKS[0])
    with pytest.raises(ValueError, match="global vertex ids.*local_block"):
        glob.add_self_loops()
    with pytest.raises(ValueError, match="global vertex ids"):
        glob.remove_self_loops()
    # a program reading one tensor at sources and destinations would read row i for destination i
    with pytest.raises(ValueError, match="'h' is read at both sources and destinations, but this block's sources are "
                                         "global vertex ids"):
        MODELS["sage_mean"].program(glob, h=x)
    # one read only at sources is fine, and equals the local block's
    out = MODELS["sage_mean"].program(local, h=x[ids])
    assert out.shape == (local.num_dst, 5)


def test_errors_name_what_was_wrong():
    local, glob, ids, *_, x = _global(BLOCKS[0])
    with pytest.raises(ValueError, match="bipartite"):
        ss.Graph.from_edge_index(torch.tensor([[0], [1]]), 3).with_global_sources(torch.arange(3), 5)
    with pytest.raises(ValueError, match="10 ids for 11 sources"):
        local.with_global_sources(ids[:10], TABLE_ROWS)
    with pytest.raises(ValueError, match="out of range"):
        local.with_global_sources(ids, 5)
    typed = ss.Graph.from_edge_index(torch.tensor([[0, 2], [1, 0]]), num_nodes=(3, 2), node_type=torch.tensor([0, 1, 0]))
    with pytest.raises(ValueError, match="node types"):
        typed.with_global_sources(torch.arange(3), 5)
    conv = ss.nn.SAGEConv(5, 7).double()
    with pytest.raises(ValueError, match=f"whole feature table of {TABLE_ROWS} rows"):
        conv(glob, x[ids])  # the gathered rows, not the table


def test_pickle_keeps_the_global_sources():
    local, glob, ids, *_, x = _global(BLOCKS[0])
    again = pickle.loads(pickle.dumps(glob))
    assert again.sources_global and again.num_src == TABLE_ROWS and again.num_dst == glob.num_dst
    assert torch.equal(again.edge_index, glob.edge_index)
    assert torch.equal(again.source_ids, ids) and torch.equal(again.local_block.edge_index, local.edge_index)
    conv = ss.nn.SAGEConv(5, 7).double()
    torch.testing.assert_close(conv(again, x), conv(glob, x), rtol=0, atol=0)


def _data(n=300, e=3000, f=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=gen)
    ei = torch.cat([ei, torch.tensor([[7] * 40, list(range(40))])], 1)  # a hub
    g = ss.Graph.from_edge_index(ei, n)
    return g, torch.randn(n, f, generator=gen, dtype=torch.float64), torch.randint(0, 3, (n,), generator=gen)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_loader_in_place_trains_exactly_as_gathering(prefetch):
    """Same batches, same losses and parameter gradients with and without x_in_place (SAGE reads
    in place, GAT gathers inside the layer)."""
    g, x, y = _data()
    kw = dict(num_neighbors=[4, 3], batch_size=64, seed=5, prefetch=prefetch)
    for make in (lambda: [ss.nn.SAGEConv(6, 8), ss.nn.SAGEConv(8, 3)],
                 lambda: [ss.nn.GATConv(6, 4, heads=2), ss.nn.GATConv(8, 3)]):
        torch.manual_seed(0)
        convs = torch.nn.ModuleList(make()).double()
        n_batches = 0
        for a, b in zip(NeighborLoader((g, x, y), **kw), NeighborLoader((g, x, y), x_in_place=True, **kw)):
            assert b.x is x and b.blocks[0].sources_global and b.blocks[0].num_src == g.num_nodes
            assert torch.equal(b.blocks[0].local_block.edge_index, a.blocks[0].edge_index)
            assert torch.equal(b.input_nodes, a.input_nodes) and torch.equal(b.y, a.y)
            losses, grads = [], []
            for batch in (a, b):
                h = F.relu(convs[0](batch.blocks[0], batch.x))
                loss = F.cross_entropy(convs[1](batch.blocks[1], h), batch.y)
                losses.append(loss)
                grads.append(torch.autograd.grad(loss, list(convs.parameters())))
            torch.testing.assert_close(losses[1], losses[0], rtol=1e-12, atol=1e-12)
            for g1, g0 in zip(*grads[::-1]):
                torch.testing.assert_close(g1, g0, rtol=1e-10, atol=1e-12)
            n_batches += 1
        assert n_batches == 5


def test_loader_in_place_refuses_node_types():
    g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), 3, node_type=torch.tensor([0, 1, 0]))
    with pytest.raises(ValueError, match="x_in_place=True needs a graph without node types"):
        NeighborLoader((g, torch.randn(3, 2), None), num_neighbors=[2], x_in_place=True)


def test_the_partitioned_loader_refuses_in_place_reads():
    from seastar.distributed.minibatch import PartitionNeighborLoader
    g, x, y = _data()
    with pytest.raises(ValueError, match="no whole feature table to read in place"):
        PartitionNeighborLoader(g, None, y, torch.arange(10), [2], x_in_place=True)
