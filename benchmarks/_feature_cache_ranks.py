"""The ranks of benchmarks/bench_feature_cache.py (a module of its own: spawned processes
import their function by name)."""
from __future__ import annotations

import json

import torch

import seastar as ss
from seastar.distributed.feature_cache import (CachedFeatures, capacity_rows, epoch_report, hot_by_degree,
                                               hot_by_sampling)
from seastar.distributed.minibatch import PartitionedFeatures, PartitionNeighborLoader


def rank(r, world, out, num_nodes, avg_degree, width, fractions, batch_size):
    torch.set_num_threads(1)
    ei = ss.datasets.power_law_graph(num_nodes, avg_degree, seed=0, build_graph=False).edge_index
    graph = ss.Graph.from_edge_index(ei, num_nodes=num_nodes)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(num_nodes, width, generator=g)
    train = torch.rand(num_nodes, generator=g) < 0.05
    assignment = torch.randperm(num_nodes, generator=g) % world
    owned = (assignment == r).nonzero().view(-1)
    feats = PartitionedFeatures(x[owned], owned, assignment)
    seeds = owned[train[owned]]
    y = torch.zeros(num_nodes, dtype=torch.long)

    def epoch(features):  # the fetches of one epoch (epoch 0), no training
        loader = PartitionNeighborLoader(graph, features, y, seeds, [10, 5], batch_size=batch_size, seed=3)
        before = dict(features.stats)
        for _ in loader:
            pass
        return epoch_report(features.stats, before)

    rows = [dict(policy="none", fraction=0.0, **epoch(feats))]
    for policy in ("degree", "sampling"):
        for fraction in fractions:
            cap = capacity_rows(feats, fraction=fraction)
            if policy == "degree":
                hot = hot_by_degree(graph, feats, cap)
            else:  # probes epoch 1, the measurement is epoch 0
                probe = PartitionNeighborLoader(graph, feats, y, seeds, [10, 5], batch_size=batch_size, seed=3,
                                                prefetch=0)
                hot = hot_by_sampling(probe, feats, cap, epoch=1)
            cached = CachedFeatures(feats, hot)
            rows.append(dict(policy=policy, fraction=fraction, cache_rows=cached.stats["cache_rows"],
                             fill_bytes=cached.stats["fill_bytes"], **epoch(cached)))
    if r == 0:
        with open(out, "w") as f:
            json.dump(dict(rank=0, world_size=world, remote_rows_total=num_nodes - owned.numel(), rows=rows), f)
