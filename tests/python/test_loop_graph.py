"""The self-loop graph that GATConv and GCNConv propagate over: built in C++ from the graph's own
storage, the same edges, order and bookkeeping as PyG's remove_self_loops + add_self_loops on the
edge list, and without an int64 edge list kept beside the graph."""
import gc
import warnings

import pytest
import torch

import seastar as ss
from seastar.nn import _loops


def reference(ei: torch.Tensor, num_loops: int):
    """PyG's construction on the edge list: non-loop edges in order, then loops 0 .. L-1."""
    is_loop = ei[0] == ei[1]
    kept = torch.nonzero(~is_loop).flatten()
    loop_edges = torch.nonzero(is_loop & (ei[0] < num_loops)).flatten()
    loops = torch.arange(num_loops)
    return torch.cat([ei[:, kept], torch.stack([loops, loops])], 1), kept, loop_edges, ei[0, loop_edges]


def random_graph(gen, num_src, num_dst, num_edges):
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, num_dst, (num_edges,), generator=gen)
    k, m = num_edges // 3, min(num_src, num_dst)
    if k and m:  # self loops, several at some vertices, scattered through the edge order
        v = torch.randint(0, m, (k,), generator=gen)
        src[:k], dst[:k] = v, v
    perm = torch.randperm(num_edges, generator=gen)
    return torch.stack([src[perm], dst[perm]])


@pytest.mark.parametrize("bipartite", [False, True])
def test_loop_graph_matches_the_edge_list_construction(bipartite):
    gen = torch.Generator().manual_seed(7)
    for trial in range(40):
        ns = int(torch.randint(1, 25, (), generator=gen))
        nd = int(torch.randint(1, 25, (), generator=gen)) if bipartite else ns
        if bipartite and nd == ns:
            nd += 1
        ei = random_graph(gen, ns, nd, int(torch.randint(0, 90, (), generator=gen)) if trial else 0)
        g = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd) if bipartite else ns)
        for num_loops in {min(ns, nd), min(ns, nd) // 2, 0}:
            lg = _loops.loop_graph(g, ns, nd, num_loops, None)
            ids = _loops._loop_ids(g, ns, nd, num_loops)
            want = reference(ei, num_loops)
            assert torch.equal(lg.structure.edge_index, want[0])
            assert torch.equal(ids.kept, want[1])
            assert torch.equal(ids.loop_edges, want[2])
            assert torch.equal(ids.loop_vertex, want[3])
            assert lg.structure.edges is None
            assert lg.structure.graph.is_bipartite == bipartite
            assert (lg.structure.graph.num_src, lg.structure.graph.num_dst) == (ns, nd)


def test_replace_self_loops_rejects_more_loops_than_vertices():
    g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=(2, 3))
    for build in (g._g.replace_self_loops, g._g.self_loop_ids):
        with pytest.raises(ValueError, match="num_loops = 3"):
            build(3)


def test_gat_on_a_graph_keeps_no_int64_edge_list():
    """Before, the loop graph read the graph's edge_index (then kept with the graph) and kept its
    own: two [2, E] int64 lists, more than the int32 graphs themselves, and the E' ids of the
    kept edges, which only layers with edge values read."""
    gen = torch.Generator().manual_seed(3)
    n, e = 307, 2011
    ei = random_graph(gen, n, n, e)
    kept = int((ei[0] != ei[1]).sum())
    g = ss.Graph.from_edge_index(ei, num_nodes=n)
    del ei
    conv = ss.nn.GATConv(8, 4, heads=2)
    x = torch.randn(n, 8, generator=gen)
    conv(g, x).sum().backward()
    gc.collect()
    sizes = {2 * e, kept, 2 * (kept + n)}  # the graph's edge list, the kept ids, the loop graph's list
    with warnings.catch_warnings():  # isinstance on some of torch's deprecated objects warns
        warnings.simplefilter("ignore")
        # (fake tensors that compiled code of other tests left have symbolic sizes: not graphs here)
        lists = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.dtype == torch.int64
                 and isinstance(o.numel(), int) and o.numel() in sizes]
    assert not lists, [tuple(t.shape) for t in lists]
