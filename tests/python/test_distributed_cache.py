"""The hot-vertex feature cache for partitioned features, on 2 real processes (gloo) over a
synthetic power-law graph (R-MAT, 20,000 vertices, 200,000 edges, random 2-way assignment):
every batch's rows equal x's exactly, a cached epoch trains to bitwise the parameters of an
uncached one, a cache of 10% of the remote rows removes at least half the remote bytes of an
epoch (the figure is printed; a sampling pass probes another epoch than the one measured), and misses are fetched on the loader's thread, ahead of the step."""
from __future__ import annotations

import pytest
import torch

from seastar.distributed import launch
from seastar.distributed.feature_cache import capacity_rows

import cache_workers as workers


@pytest.mark.parametrize("policy", ["degree", "sampling"])
def test_cache_is_exact_and_removes_most_remote_bytes(tmp_path, policy):
    launch.spawn(workers.cache_rank, 2, args=(str(tmp_path), policy, 0.10), timeout_s=240)
    for rank in range(2):
        r = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        assert r["same_rows"] and r["same_params"]
        assert r["cache_rows"] == r["capacity"] == round(0.10 * r["remote_total"])
        plain, cached = r["plain"], r["cached"]
        assert plain["remote_rows"] == cached["remote_rows"] > 0  # the same batches asked for the same rows
        assert cached["hits"] + cached["misses"] == cached["remote_rows"]
        saved = 1 - cached["bytes_received"] / plain["bytes_received"]
        row_bytes = workers.WIDTH * 8
        assert cached["bytes_received"] == cached["misses"] * row_bytes  # only the misses travel
        print(f"{policy} rank {rank}: cache {r['cache_rows']} of {r['remote_total']} remote rows, hit rate "
              f"{cached['hit_rate']:.3f}, remote bytes per epoch {plain['bytes_received']} -> "
              f"{cached['bytes_received']} ({saved:.1%} removed; filling the cache took {r['fill_bytes']})")
        assert saved >= 0.5
        assert r["loader_thread_fetches"] == r["fetches"] > 0  # every batch fetched on the loader thread


def test_bad_cache_sizes():
    class F:  # the attributes capacity_rows reads
        assignment, owned, rows = torch.zeros(10, dtype=torch.long), torch.arange(4), torch.zeros(4, 3)
    with pytest.raises(ValueError, match="exactly one"):
        capacity_rows(F, rows=1, fraction=0.1)
    with pytest.raises(ValueError, match="fraction"):
        capacity_rows(F, fraction=1.5)
    assert capacity_rows(F, nbytes=25) == 2  # 12-byte rows
    assert capacity_rows(F, rows=100) == 6  # at most every remote row


def test_a_fetch_without_hits_is_the_base_fetch_and_one_with_hits_asks_only_the_misses():
    """``CachedFeatures.fetch`` in one process, over a base that serves rows of a known table:
    without a cached id the base's rows come back as they are (no merge into a new tensor); with
    some, the base is asked only for the misses and the rows equal the table's."""
    from seastar.distributed.feature_cache import CachedFeatures
    x = torch.randn(12, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assignment = torch.tensor([0, 1] * 6)

    class Base:  # what CachedFeatures reads of a PartitionedFeatures, rank 0 of 2
        rows, rank, world = x[assignment == 0], 0, 2
        owned = (assignment == 0).nonzero().view(-1)
        stats = {"bytes_received": 0}
        asked = []

        def __init__(self):
            self.assignment = assignment

        def fetch(self, ids):
            self.asked.append(ids.clone())
            self.last = x[ids]
            return self.last

    base = Base()
    cached = CachedFeatures(base, torch.tensor([1, 3]))  # two remote rows cached
    ids = torch.tensor([0, 5, 2, 7])  # none of them cached
    out = cached.fetch(ids)
    assert out is base.last and torch.equal(out, x[ids]) and torch.equal(base.asked[-1], ids)
    ids = torch.tensor([3, 0, 1, 9, 2])
    out = cached.fetch(ids)
    assert torch.equal(out, x[ids]) and torch.equal(base.asked[-1], torch.tensor([0, 9, 2]))
    assert cached.stats["hits"] == 2 and cached.stats["remote_rows"] == 2 + 3
