"""What the ranks of the feature-cache tests run (a module of its own: spawned processes import
their function by name): one epoch of mini-batches over partitioned features of a power-law
graph, uncached and cached, training the same small model on each."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import seastar as ss
from seastar.distributed.feature_cache import (CachedFeatures, capacity_rows, epoch_report, hot_by_degree,
                                               hot_by_sampling)
from seastar.distributed.minibatch import PartitionedFeatures, PartitionNeighborLoader

NUM_NODES, AVG_DEGREE, WIDTH, CLASSES = 20_000, 10.0, 16, 4


def power_law_data(world: int):
    """The same graph, features, labels, training seeds and random assignment on every rank."""
    ei = ss.datasets.power_law_graph(NUM_NODES, AVG_DEGREE, seed=0, build_graph=False).edge_index
    graph = ss.Graph.from_edge_index(ei, num_nodes=NUM_NODES)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(NUM_NODES, WIDTH, dtype=torch.float64, generator=g)
    y = torch.randint(0, CLASSES, (NUM_NODES,), generator=g)
    train = torch.rand(NUM_NODES, generator=g) < 0.05
    assignment = torch.randperm(NUM_NODES, generator=g) % world
    return graph, x, y, train, assignment


def _epoch(graph, feats, y, seeds, x_ref):
    """One epoch: every batch's rows checked against x, and the parameters after training on them."""
    torch.manual_seed(0)
    convs = torch.nn.ModuleList([ss.nn.SAGEConv(WIDTH, 8), ss.nn.SAGEConv(8, CLASSES)]).double()
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    loader = PartitionNeighborLoader(graph, feats, y, seeds, [10, 5], batch_size=64, seed=3, prefetch=2)
    rows = []
    for b in loader:
        assert torch.equal(b.x, x_ref[b.input_nodes]), "fetched rows differ from x"
        rows.append(b.x)
        h = b.x
        for i, (conv, blk) in enumerate(zip(convs, b.blocks)):
            h = conv(blk, h)
            h = F.relu(h) if i == 0 else h
        opt.zero_grad()
        F.cross_entropy(h, b.y).backward()
        opt.step()
    return rows, torch.cat([p.detach().reshape(-1) for p in convs.parameters()])


def cache_rank(rank, world, out_dir, policy, fraction):
    torch.set_num_threads(1)
    graph, x, y, train, assignment = power_law_data(world)
    owned = (assignment == rank).nonzero().view(-1)
    feats = PartitionedFeatures(x[owned], owned, assignment)
    seeds = owned[train[owned]]
    before = dict(feats.stats)
    plain_rows, plain_params = _epoch(graph, feats, y, seeds, x)
    plain = epoch_report(feats.stats, before)

    capacity = capacity_rows(feats, fraction=fraction)
    if policy == "degree":
        hot = hot_by_degree(graph, feats, capacity)
    else:
        probe = PartitionNeighborLoader(graph, feats, y, seeds, [10, 5], batch_size=64, seed=3, prefetch=0)
        hot = hot_by_sampling(probe, feats, capacity, epoch=1)  # not the epoch measured
    cached = CachedFeatures(feats, hot)
    cached_rows, cached_params = _epoch(graph, cached, y, seeds, x)
    report = epoch_report(cached.stats, {})
    torch.save(dict(plain=plain, cached=report, capacity=capacity, remote_total=NUM_NODES - owned.numel(),
                    fill_bytes=cached.stats["fill_bytes"], cache_rows=cached.stats["cache_rows"],
                    loader_thread_fetches=cached.stats["loader_thread_fetches"], fetches=cached.stats["fetches"],
                    same_rows=len(plain_rows) == len(cached_rows) and all(torch.equal(a, b) for a, b in
                                                                          zip(plain_rows, cached_rows)),
                    same_params=torch.equal(plain_params, cached_params)), f"{out_dir}/rank{rank}.pt")
