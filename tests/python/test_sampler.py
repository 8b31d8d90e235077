"""The neighbour sampler and the loader: sampled edges exist, counts and relabelling are right,
draws are uniform (chi-square on a fixed graph) or follow the weights, and the same seed gives
the same batches at any thread count."""
from __future__ import annotations

import math
import time

import pytest
import torch

import seastar as ss
from seastar.loader import NeighborLoader, sample_blocks


def _graph(n=60, e=600, seed=0, typed=False):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, n, (e,), generator=g)
    # a hub destination and repeated pairs
    src = torch.cat([src, torch.arange(n), torch.full((5,), 3)])
    dst = torch.cat([dst, torch.zeros(n, dtype=torch.long), torch.full((5,), 7)])
    ei = torch.stack([src, dst])
    if typed:
        et = torch.randint(0, 3, (ei.shape[1],), generator=g)
        return ss.Graph.from_edge_index(ei, num_nodes=n, edge_type=et, num_edge_types=3), ei, et
    return ss.Graph.from_edge_index(ei, num_nodes=n), ei, None


def _check_block(graph, ei, block, nodes, eids, dst_global, fanout, replace=False):
    assert block.is_bipartite and block.num_dst == dst_global.numel() and block.num_src == nodes.numel()
    assert torch.equal(nodes[: block.num_dst], dst_global)  # destinations first among the sources
    assert torch.unique(nodes).numel() == nodes.numel()
    bei = block.edge_index
    # every sampled edge exists in the graph and relabels back to its original endpoints
    assert torch.equal(nodes[bei[0]], ei[0, eids])
    assert torch.equal(dst_global[bei[1]], ei[1, eids])
    indeg = torch.bincount(ei[1], minlength=graph.num_nodes)
    got = torch.bincount(bei[1], minlength=block.num_dst)
    for i, v in enumerate(dst_global.tolist()):
        d = int(indeg[v])
        want = d if fanout < 0 else (min(fanout, d) if not replace else (fanout if d else 0))
        assert int(got[i]) == want, (v, d, fanout)
        mine = eids[bei[1] == i]
        if not replace:
            assert torch.unique(mine).numel() == mine.numel(), "an edge sampled twice without replacement"
    # sources beyond the destinations are exactly the new neighbours
    assert set(nodes[block.num_dst:].tolist()) == set(nodes[bei[0]].tolist()) - set(dst_global.tolist())


@pytest.mark.parametrize("fanouts", [[3, 2], [-1], [5, -1, 1], [0, 2]])
@pytest.mark.parametrize("replace", [False, True])
def test_blocks_are_valid(fanouts, replace):
    graph, ei, _ = _graph()
    seeds = torch.tensor([0, 7, 3, 41, 59, 12])
    b = sample_blocks(graph, seeds, fanouts, seed=11, replace=replace)
    assert len(b.blocks) == len(fanouts)
    assert torch.equal(b.seed_nodes, seeds) and torch.equal(b.input_nodes, b.src_nodes[0])
    dst = seeds
    # blocks are outermost first; hop k (fanouts[k]) made blocks[-1-k]
    for k, f in enumerate(fanouts):
        i = len(fanouts) - 1 - k
        _check_block(graph, ei, b.blocks[i], b.src_nodes[i], b.edge_ids[i], dst, f, replace and f >= 0)
        dst = b.src_nodes[i]


def test_all_neighbours():
    graph, ei, _ = _graph()
    seeds = torch.arange(graph.num_nodes)
    b = sample_blocks(graph, seeds, [-1])
    assert b.blocks[0].num_edges == graph.num_edges
    assert sorted(b.edge_ids[0].tolist()) == list(range(graph.num_edges))


@pytest.mark.parametrize("n, e, num_seeds, fanouts", [(500, 8000, 200, [4, 3]), (20000, 400000, 4000, [25, 20])],
                         ids=["small", "parallel_relabel"])  # a hop of >= 65536 edges relabels on a team of 4+
def test_same_seed_same_batches_at_any_thread_count(n, e, num_seeds, fanouts):
    graph, _, _ = _graph(n=n, e=e)
    seeds = torch.randperm(n, generator=torch.Generator().manual_seed(1))[:num_seeds]
    old = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            b = sample_blocks(graph, seeds, fanouts, seed=99)
            runs.append([(bl.edge_index, n, e) for bl, n, e in zip(b.blocks, b.src_nodes, b.edge_ids)])
    finally:
        torch.set_num_threads(old)
    for run in runs[1:]:
        for (ea, na, ia), (eb, nb, ib) in zip(runs[0], run):
            assert torch.equal(ea, eb) and torch.equal(na, nb) and torch.equal(ia, ib)
    if fanouts[-1] * num_seeds >= 1 << 16:
        assert b.blocks[-1].num_edges >= 1 << 16
    other = sample_blocks(graph, seeds, fanouts, seed=100)
    assert not torch.equal(other.edge_ids[-1], runs[0][-1][2])


def _chi_square(counts, probs, trials):
    return sum((c - p * trials) ** 2 / (p * trials) for c, p in zip(counts, probs))


# chi-square critical values at p = 0.001
CRIT = {9: 27.88, 3: 16.27}


def test_uniform_without_replacement_chi_square():
    # destination 0 with 10 in-neighbours; fanout 3: each neighbour taken with probability 3/10
    ei = torch.stack([torch.arange(1, 11), torch.zeros(10, dtype=torch.long)])
    graph = ss.Graph.from_edge_index(ei, num_nodes=11)
    counts = torch.zeros(10)
    trials = 4000
    for s in range(trials):
        b = sample_blocks(graph, torch.tensor([0]), [3], seed=s)
        counts[b.edge_ids[0]] += 1
    assert counts.sum() == 3 * trials
    stat = _chi_square(counts.tolist(), [0.1] * 10, 3 * trials)
    assert stat < CRIT[9], stat


def test_weighted_with_replacement_follows_the_weights():
    ei = torch.stack([torch.arange(1, 5), torch.zeros(4, dtype=torch.long)])
    graph = ss.Graph.from_edge_index(ei, num_nodes=5)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    counts = torch.zeros(4)
    trials = 3000
    for s in range(trials):
        b = sample_blocks(graph, torch.tensor([0]), [2], seed=s, replace=True, weights=w)
        counts += torch.bincount(b.edge_ids[0], minlength=4)
    stat = _chi_square(counts.tolist(), (w / w.sum()).tolist(), 2 * trials)
    assert stat < CRIT[3], stat


def test_weighted_without_replacement_never_takes_zero_weights():
    ei = torch.stack([torch.arange(1, 7), torch.zeros(6, dtype=torch.long)])
    graph = ss.Graph.from_edge_index(ei, num_nodes=7)
    w = torch.tensor([0.0, 1.0, 5.0, 0.0, 1.0, 1.0])
    heavy = 0
    for s in range(500):
        got = sample_blocks(graph, torch.tensor([0]), [2], seed=s, weights=w).edge_ids[0].tolist()
        assert len(got) == 2 and len(set(got)) == 2 and 0 not in got and 3 not in got
        heavy += 2 in got
    assert heavy > 400  # P(edge 2 among 2 of weights 1,5,1,1) ~ 0.92


def test_per_relation_fanouts():
    graph, ei, et = _graph(typed=True)
    seeds = torch.tensor([0, 7, 5])
    b = sample_blocks(graph, seeds, [[2, 0, 1]], seed=3)
    blk, eids = b.blocks[0], b.edge_ids[0]
    assert torch.equal(blk.edge_type, et[eids])  # edge types follow the sampled edges
    for i, v in enumerate(seeds.tolist()):
        mine = eids[blk.edge_index[1] == i]
        for r, f in enumerate([2, 0, 1]):
            have = int(((ei[1] == v) & (et == r)).sum())
            assert int((et[mine] == r).sum()) == min(f, have)


def test_sampler_errors():
    graph, _, _ = _graph()
    with pytest.raises(ValueError, match=r"seed\[1\] = 60 is out of range"):
        sample_blocks(graph, torch.tensor([0, 60]), [2])
    with pytest.raises(ValueError, match="appears twice"):
        sample_blocks(graph, torch.tensor([1, 1]), [2])
    with pytest.raises(ValueError, match="must be >= 0, or -1"):
        sample_blocks(graph, torch.tensor([1]), [-2])
    with pytest.raises(ValueError, match="one per relation"):
        sample_blocks(graph, torch.tensor([1]), [[1, 2]])
    with pytest.raises(ValueError, match="weights has 3 entries"):
        sample_blocks(graph, torch.tensor([1]), [2], weights=torch.ones(3))
    with pytest.raises(TypeError, match="integer vertex ids"):
        sample_blocks(graph, torch.tensor([1.0]), [2])


def test_loader_uses_every_seed_once_per_epoch():
    graph, _, _ = _graph()
    x = torch.randn(graph.num_nodes, 4)
    y = torch.randint(0, 3, (graph.num_nodes,))
    mask = torch.zeros(graph.num_nodes, dtype=torch.bool)
    mask[::3] = True
    loader = NeighborLoader((graph, x, y), num_neighbors=[3, 2], batch_size=7, input_nodes=mask, seed=5)
    assert len(loader) == math.ceil(int(mask.sum()) / 7)
    epochs = []
    for _ in range(2):
        seen = []
        for batch in loader:
            assert torch.equal(batch.x, x[batch.input_nodes]) and torch.equal(batch.y, y[batch.seed_nodes])
            assert batch.blocks[-1].num_dst == batch.batch_size
            seen.append(batch.seed_nodes)
        seen = torch.cat(seen)
        assert sorted(seen.tolist()) == mask.nonzero().view(-1).tolist()
        epochs.append(seen)
    assert not torch.equal(epochs[0], epochs[1])  # shuffled anew each epoch
    again = NeighborLoader((graph, x, y), num_neighbors=[3, 2], batch_size=7, input_nodes=mask, seed=5, prefetch=0)
    assert torch.equal(torch.cat([b.seed_nodes for b in again]), epochs[0])  # same seed, same batches
    assert loader.stats["batches"] == len(loader)


def test_the_loader_samples_prefetch_batches_ahead_and_gathers_one():
    """Beside the batch being trained on: at most `prefetch` sampled batches, of which one at most
    has its rows of x gathered (they are most of a batch's memory)."""
    graph, _, _ = _graph()
    x = torch.randn(graph.num_nodes, 4)
    prefetch, n = 3, 6
    loader = NeighborLoader((graph, x, None), num_neighbors=[2], batch_size=graph.num_nodes // n, prefetch=prefetch)
    events = []
    sample, gather = loader._sample, loader._gather
    loader._sample = lambda *a: (events.append("sample"), sample(*a))[1]
    loader._gather = lambda b: (events.append("gather"), gather(b))[1]

    def settle(samples: int, gathers: int) -> None:  # wait until the producer has got this far
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (events.count("sample"), events.count("gather")) < (samples, gathers):
            time.sleep(0.01)
        time.sleep(0.05)  # and give it the time to go further, which it must not

    for k, batch in enumerate(loader):  # batch k is being trained on
        settle(min(n, k + 1 + prefetch), min(n, k + 2))
        assert events.count("sample") == min(n, k + 1 + prefetch)
        assert events.count("gather") == min(n, k + 2)
        assert torch.equal(batch.x, x[batch.input_nodes])
    assert k == n - 1


def test_loader_stops_cleanly_and_reports_errors():
    graph, _, _ = _graph()
    loader = NeighborLoader((graph, None, None), num_neighbors=[2], batch_size=4, prefetch=1)
    for i, _ in enumerate(loader):
        if i == 2:
            break  # the background thread must not hang
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        NeighborLoader((graph, None, None), num_neighbors=[2], batch_size=0)
    with pytest.raises(ValueError, match="one row per vertex"):
        NeighborLoader((graph, torch.randn(3, 2), None), num_neighbors=[2])
    bad = NeighborLoader((graph, None, None), num_neighbors=[-5], batch_size=4)
    with pytest.raises(ValueError, match="must be >= 0, or -1"):
        list(bad)  # raised on the loader thread, re-raised here


def test_layerwise_inference_equals_full_graph():
    graph, _, _ = _graph()
    x = torch.randn(graph.num_nodes, 5, dtype=torch.float64)
    convs = [ss.nn.SAGEConv(5, 6).double(), ss.nn.SAGEConv(6, 3).double()]
    with torch.no_grad():
        full = convs[1](graph, torch.relu(convs[0](graph, x)))
    got = ss.loader.layerwise_inference(convs, graph, x, batch_size=13, between=lambda i, h: torch.relu(h))
    torch.testing.assert_close(got, full, rtol=1e-10, atol=1e-10)


def test_synthetic_dataset_is_deterministic_and_homophilous():
    a = ss.datasets.synthetic_node_classification(2000, avg_degree=8, num_classes=4, num_features=6, seed=3)
    b = ss.datasets.synthetic_node_classification(2000, avg_degree=8, num_classes=4, num_features=6, seed=3)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert a.graph.num_edges == 16000 and a.x.shape == (2000, 6) and a.num_classes == 4
    ei = a.edge_index
    same = (a.y[ei[0]] == a.y[ei[1]]).double().mean().item()
    assert 0.75 < same < 0.85  # homophily 0.8
    assert not (a.train_mask & a.test_mask).any() and (a.train_mask | a.val_mask | a.test_mask).all()
    c = ss.datasets.synthetic_node_classification(2000, avg_degree=8, num_classes=4, num_features=6, seed=4)
    assert not torch.equal(a.edge_index, c.edge_index)


@pytest.mark.parametrize("x", [torch.randn(50, 7, dtype=torch.float64), torch.randn(50, 3, 4),
                               torch.randint(0, 9, (50,)), torch.rand(50, 2) > 0.5,
                               torch.randn(50, 0)], ids=["f64", "3d", "labels", "bool", "empty_rows"])
def test_gather_rows_equals_index_select(x):
    idx = torch.tensor([4, 0, 49, 4, 17, 3])
    assert torch.equal(ss._C.gather_rows(x, idx), x.index_select(0, idx))
    assert ss._C.gather_rows(x, idx[:0]).shape == (0,) + x.shape[1:]
    with pytest.raises(ValueError, match=r"idx\[1\] = 50 is out of range for 50 rows"):
        ss._C.gather_rows(x, torch.tensor([1, 50]))


def test_large_gathers_run_on_the_team_and_behave_as_any_tensor():
    """Gathers of 1 MB or more (copied by the OpenMP team): the same values as index_select,
    many in a row, and tensors that behave as any other (views, in-place writes, pickling)."""
    import pickle
    x = torch.randn(20000, 64, dtype=torch.float64)
    keep = []
    for k in range(40):
        idx = torch.randint(0, 20000, (3000 + 17 * k,), generator=torch.Generator().manual_seed(k))
        out = ss._C.gather_rows(x, idx)
        assert out.numel() * 8 >= 1 << 20 and out.is_contiguous()
        assert torch.equal(out, x.index_select(0, idx))
        if k % 10 == 0:
            keep.append((idx, out[5:]))  # a view keeps the pages alive after `out` is dropped
    del out
    for idx, view in keep:
        assert torch.equal(view, x.index_select(0, idx)[5:])
    view.mul_(2)
    assert torch.equal(pickle.loads(pickle.dumps(view)), x.index_select(0, idx)[5:] * 2)


def test_large_gathers_recycle_the_buffers_of_dead_outputs_only():
    """A gather of 1 MB or more writes into a buffer a dead output gave back (its pages are
    mapped already), never into one a live tensor still views; buffers come back from any
    thread, and only a few stay idle."""
    import gc
    import threading
    gc.collect()  # outputs of earlier tests that only a cycle kept alive give their buffers back now,
    ss._C.release_idle_gather_buffers()  # and the shelf starts empty: only this test's buffers are on it
    assert ss._C.gather_buffers_idle_bytes() == 0
    x = torch.randn(5000, 500)  # 6 MB outputs
    idx = [torch.randint(0, 5000, (3000 + 37 * k,), generator=torch.Generator().manual_seed(k)) for k in range(12)]
    first = ss._C.gather_rows(x, idx[0])
    ptr = first.data_ptr()
    del first
    again = ss._C.gather_rows(x, idx[1])  # a little larger: fits the headroom of the first
    assert again.data_ptr() == ptr and torch.equal(again, x.index_select(0, idx[1]))
    live = [again] + [ss._C.gather_rows(x, i) for i in idx[2:8]]
    assert len({t.data_ptr() for t in live}) == len(live)  # no live buffer is lent twice
    for t, i in zip(live, idx[1:8]):
        assert torch.equal(t, x.index_select(0, i))
    dropper = threading.Thread(target=live.clear)  # outputs die on another thread
    dropper.start()
    dropper.join()
    assert 0 < ss._C.gather_buffers_idle_bytes() <= 4 * (3000 + 37 * 12) * 500 * 4 * 1.25 + 4 * 65536
    for i in idx[8:]:
        assert torch.equal(ss._C.gather_rows(x, i), x.index_select(0, i))
    with pytest.raises(TypeError, match="integer row ids"):
        ss._C.gather_rows(x, torch.tensor([0.0, 1.0]))


def test_gather_rows_falls_back_to_index_select():
    """Rows that are not contiguous, or a tensor autograd tracks (learned embeddings as the
    loader's x), go through index_select: the same values, and the gradient flows."""
    x = torch.randn(7, 10)[:, ::2]
    idx = torch.tensor([6, 1, 1])
    assert torch.equal(ss._C.gather_rows(x, idx), x.index_select(0, idx))
    emb = torch.randn(7, 3, requires_grad=True)
    ss._C.gather_rows(emb, idx).sum().backward()
    assert torch.equal(emb.grad[:, 0], torch.tensor([0., 2., 0., 0., 0., 0., 1.]))


def test_the_loader_thread_samples_on_the_cores_training_leaves():
    """set_local_threads changes the OpenMP team of the calling thread only; the loader's thread
    takes the cores that training's threads leave (at least one)."""
    import threading
    main_before = ss._C.local_threads()
    seen = []

    def other():
        ss._C.set_local_threads(1)
        seen.append(ss._C.local_threads())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [1] and ss._C.local_threads() == main_before
    with pytest.raises(ValueError, match="n >= 1"):
        ss._C.set_local_threads(0)
    from seastar import loader
    graph, _, _ = _graph()
    widths = []
    real = ss._C.sample_neighbors

    def recording(*args, **kwargs):
        widths.append(ss._C.local_threads())
        return real(*args, **kwargs)

    ss._C.sample_neighbors = recording
    try:
        list(NeighborLoader((graph, None, None), num_neighbors=[2], batch_size=30, prefetch=1))
    finally:
        ss._C.sample_neighbors = real
    assert widths and set(widths) == {max(1, loader._cores() - torch.get_num_threads())}


def _directional_reference(ei, seeds, fanouts_all_hops):
    """PyG's NeighborLoader (subgraph_type="directional") with every neighbour, in plain torch:
    the vertices reached at each hop (the seeds at hop 0) and the in-edges of every vertex
    reached before the last hop, each vertex's taken once, at the hop that reached it."""
    seen, hops, edges = set(seeds.tolist()), [seeds.tolist()], []
    frontier = seeds.tolist()
    for _ in range(fanouts_all_hops):
        into = torch.isin(ei[1], torch.tensor(frontier, dtype=torch.long))
        edges += torch.nonzero(into).flatten().tolist()
        new = [u for u in dict.fromkeys(ei[0, into].tolist()) if u not in seen]
        seen.update(new)
        hops.append(new)
        frontier = new
    return hops, sorted(edges)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_subgraph_holds_pyg_directional_edges(hops):
    """NeighborLoader(subgraph=True)'s graph with full fanouts: each hop's vertices after the
    earlier ones (the seeds first), and exactly the in-edges of the vertices reached before the
    last hop, each once, relabelled to the subgraph's ids."""
    graph, ei, _ = _graph()
    seeds = torch.tensor([7, 3, 41, 12])
    b = ss.loader.sample_subgraph(graph, seeds, [-1] * hops, seed=2)
    sub, nodes, eid = b.graph, b.input_nodes, b.edge_ids[0]
    assert not sub.is_bipartite and sub.num_nodes == nodes.numel() and b.blocks == []
    assert torch.equal(nodes[:4], seeds) and torch.equal(b.seed_nodes, seeds)
    assert torch.equal(nodes[sub.edge_index], ei[:, eid])  # real edges, relabelled
    ref_hops, ref_edges = _directional_reference(ei, seeds, hops)
    assert sorted(eid.tolist()) == ref_edges  # each once
    at = 0
    for h in ref_hops:
        assert set(nodes[at:at + len(h)].tolist()) == set(h)
        at += len(h)
    assert at == nodes.numel()


@pytest.mark.parametrize("replace", [False, True])
def test_subgraph_samples_each_vertex_once_with_its_hops_fanout(replace):
    graph, ei, _ = _graph()
    seeds = torch.tensor([0, 7, 3, 41, 59, 12])
    fanouts = [3, 2, 4]
    b = ss.loader.sample_subgraph(graph, seeds, fanouts, seed=5, replace=replace)
    blocks = sample_blocks(graph, seeds, fanouts, seed=5, replace=replace, expand_once=True)
    sub, nodes, eid = b.graph, b.input_nodes, b.edge_ids[0]
    assert torch.equal(nodes, blocks.input_nodes)
    assert torch.equal(nodes[sub.edge_index], ei[:, eid])
    if not replace:
        assert torch.unique(eid).numel() == eid.numel()
    indeg = torch.bincount(ei[1], minlength=graph.num_nodes)
    got = torch.bincount(sub.edge_index[1], minlength=sub.num_nodes)
    # the vertices reached at hop k (the first blocks[-k].num_dst ... ) took fanouts[k] in-edges
    bounds = [0] + [blk.num_dst for blk in reversed(blocks.blocks)] + [nodes.numel()]
    for k in range(len(fanouts) + 1):
        for i in range(bounds[k], bounds[k + 1]):
            d = int(indeg[nodes[i]])
            want = 0 if k == len(fanouts) else (fanouts[k] if replace and d else min(fanouts[k], d))
            assert int(got[i]) == want, (k, i, d)
    again = ss.loader.sample_subgraph(graph, seeds, fanouts, seed=5, replace=replace)
    assert torch.equal(again.edge_ids[0], eid) and torch.equal(again.input_nodes, nodes)


def test_subgraph_keeps_types_and_the_loader_gathers_its_rows():
    graph, ei, et = _graph(typed=True)
    x, y = torch.randn(graph.num_nodes, 3), torch.arange(graph.num_nodes)
    loader = NeighborLoader((graph, x, y), [4, 4], batch_size=16, subgraph=True, seed=1)
    n = 0
    for b in loader:
        assert torch.equal(b.x, x[b.input_nodes]) and torch.equal(b.y, y[b.seed_nodes])
        assert torch.equal(b.input_nodes[:b.batch_size], b.seed_nodes)
        assert torch.equal(b.graph.edge_type, et[b.edge_ids[0]])
        n += b.batch_size
    assert n == graph.num_nodes
    typed = ss.Graph.from_edge_index(ei, num_nodes=graph.num_nodes, node_type=torch.arange(graph.num_nodes) % 2,
                                     num_node_types=2)
    b = ss.loader.sample_subgraph(typed, torch.tensor([1, 2]), [2, 2])
    assert torch.equal(b.graph.node_type, b.input_nodes % 2)
    with pytest.raises(ValueError, match="subgraph=True yields no blocks"):
        NeighborLoader((graph, x, y), [2], subgraph=True, x_in_place=True)
