"""Data-parallel mini-batch training: per-epoch seed shares that are disjoint, cover every
training seed once and give every rank the same number of batches; on 2 real processes (gloo,
DistributedDataParallel) parameters identical across ranks after every step, the features
mapped from one shared file, and Cora accuracy within 1.5 points of single-process training."""
from __future__ import annotations

import statistics

import pytest
import torch

from seastar.distributed import launch
from seastar.distributed.minibatch import SeedShards

import distributed_workers as workers


@pytest.mark.parametrize("world,num_seeds,batch", [(1, 10, 3), (2, 140, 35), (3, 140, 35), (4, 7, 1), (3, 11, 4)])
def test_shards_cover_every_seed_once(world, num_seeds, batch):
    seeds = torch.randperm(1000)[:num_seeds]
    for epoch in range(3):
        shards = [SeedShards(seeds, r, world, batch, seed=5) for r in range(world)]
        parts = [s.batches(epoch) for s in shards]
        assert len({len(p) for p in parts}) == 1  # the same number of steps on every rank
        sizes = [sum(b.numel() for b in p) for p in parts]
        assert max(sizes) - min(sizes) <= 1
        assert all(b.numel() <= batch for p in parts for b in p)
        used = torch.cat([b for p in parts for b in p])
        assert torch.equal(torch.sort(used).values, torch.sort(seeds).values)
    a, b = SeedShards(seeds, 0, world, batch, seed=5), SeedShards(seeds, 0, world, batch, seed=5)
    assert torch.equal(a.share(1), b.share(1))
    if world < num_seeds:
        assert not torch.equal(a.share(0), a.share(1))


def test_rank_loaders_yield_gcn_ready_blocks_and_subgraphs():
    """Each rank's loader passes the loader's options through: GCNConv runs on its blocks, and
    subgraph=True gives square subgraphs of its own seeds."""
    import seastar as ss
    from seastar.distributed.minibatch import DistributedNeighborLoader

    ei = torch.randint(0, 50, (2, 300), generator=torch.Generator().manual_seed(0))
    graph, x, y = ss.Graph.from_edge_index(ei, num_nodes=50), torch.randn(50, 4), torch.randint(0, 3, (50,))
    conv = ss.nn.GCNConv(4, 3)
    seen = []
    for rank in range(2):
        for subgraph in (False, True):
            loader = DistributedNeighborLoader((graph, x, y), [3], batch_size=10, rank=rank, world_size=2,
                                               prefetch=0, subgraph=subgraph)
            for b in loader:
                if subgraph:
                    out = conv(b.graph, b.x)[:b.batch_size]
                    assert torch.equal(b.input_nodes[:b.batch_size], b.seed_nodes)
                else:
                    out = conv(b.blocks[0], b.x)
                assert out.shape == (b.batch_size, 3)
                if not subgraph:
                    seen.append(b.seed_nodes)
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.arange(50))


def test_shard_errors():
    with pytest.raises(ValueError, match="fewer seeds than ranks"):
        SeedShards(torch.arange(2), 0, 3, 4)
    with pytest.raises(ValueError, match="not in a world"):
        SeedShards(torch.arange(9), 3, 3, 4)


def test_two_ranks_use_each_seed_once_and_stay_identical(tmp_path):
    epochs = 3
    launch.spawn(workers.minibatch_rank, 2, (str(tmp_path / "cora.pt"), str(tmp_path), epochs, 30), timeout_s=240)
    ranks = [torch.load(tmp_path / f"mb{r}.pt") for r in range(2)]
    train = workers._cora().train_mask.nonzero().view(-1)
    for epoch in range(epochs):
        used = torch.cat([r["seeds"][epoch] for r in ranks])
        assert torch.equal(torch.sort(used).values, train), epoch
    assert ranks[0]["batches"] == ranks[1]["batches"] == 3  # 70 seeds per rank in batches of 30
    assert len(ranks[0]["params"]) == epochs * 3
    for a, b in zip(ranks[0]["params"], ranks[1]["params"]):
        assert torch.equal(a, b)
    assert not torch.equal(ranks[0]["params"][0], ranks[0]["params"][-1])
    assert all(r["mapped"] for r in ranks)  # x is the shared file's pages in both processes


def test_cora_accuracy_matches_single_process(tmp_path):
    """Mean test accuracy over 3 seeds of GraphSAGE, 30 epochs, fanouts [10, 5], global batch
    70 (35 per rank), within 1.5 points of the single-process run."""
    seeds, epochs = [0, 1, 2], 30
    launch.spawn(workers.minibatch_accuracy_rank, 2, (str(tmp_path / "cora.pt"), str(tmp_path), seeds, epochs, 35),
                 timeout_s=400)
    dist_acc = torch.load(tmp_path / "acc0.pt")
    assert dist_acc == torch.load(tmp_path / "acc1.pt")
    ds = workers._cora()
    one = [workers.minibatch_accuracy_single(ds, s, epochs, 70) for s in seeds]
    print(f"2 processes {statistics.mean(dist_acc):.4f} {dist_acc}, 1 process {statistics.mean(one):.4f} {one}")
    assert statistics.mean(one) > 0.7
    assert abs(statistics.mean(dist_acc) - statistics.mean(one)) <= 0.015


def test_partitioned_features_on_one_rank(tmp_path):
    from seastar.distributed import partition_graph

    ds = workers._cora()
    partition_graph(ds, 1, tmp_path / "parts", method="random")
    launch.spawn(workers.one_rank_fetch, 1, (str(tmp_path / "parts"), str(tmp_path)), timeout_s=120)
    r = torch.load(tmp_path / "one.pt")
    assert torch.equal(r["rows"], r["want"]) and r["empty"] == (0, ds.x.shape[1])
    assert r["stats"]["remote_rows"] == 0 and r["stats"]["fetches"] == 2
    assert len(r["errors"]) == 2 and all("vertex ids must be in [0, 2708)" in e for e in r["errors"])


def test_partitioned_features_and_own_seeds(tmp_path):
    """Each rank trains on its own part's seeds; features of remote vertices come from their
    owners (exactly the rows of x); every seed once per epoch, parameters identical."""
    from seastar.distributed import partition_graph

    ds = workers._cora()
    partition_graph(ds, 2, tmp_path / "parts", method="random")
    epochs = 2
    launch.spawn(workers.partitioned_minibatch_rank, 2,
                 (str(tmp_path / "parts"), str(tmp_path / "cora.pt"), str(tmp_path), epochs), timeout_s=240)
    ranks = [torch.load(tmp_path / f"pmb{r}.pt") for r in range(2)]
    assert all(r["fetch_ok"] and r["rows_ok"] for r in ranks)
    assert all(r["remote_rows"] > 0 for r in ranks)
    train = ds.train_mask.nonzero().view(-1)
    for epoch in range(epochs):
        for r in ranks:  # a rank's seeds are its own part's
            assert torch.isin(r["seeds"][epoch], r["owned"]).all()
        used = torch.cat([r["seeds"][epoch] for r in ranks])
        assert torch.equal(torch.sort(used).values, train)
    assert ranks[0]["batches"] == ranks[1]["batches"]
    for a, b in zip(ranks[0]["params"], ranks[1]["params"]):
        assert torch.equal(a, b)
