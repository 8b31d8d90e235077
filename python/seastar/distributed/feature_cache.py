"""A cache of hot remote feature rows for partitioned features.

With partitioned features every batch fetches the rows of its input vertices from their
owners. On power-law graphs a few hubs are the in-neighbours of very many vertices, so the
same remote rows travel batch after batch. ``CachedFeatures`` keeps, on each rank, a copy of
the remote rows its sampling touches most, fetched once at set-up, and asks the owners only
for the misses:

    feats = PartitionedFeatures.from_partition(part_dir)
    hot = hot_by_degree(graph, feats, capacity=rows)           # or hot_by_sampling(loader, feats, rows)
    cached = CachedFeatures(feats, hot)                        # a collective: fills the cache
    loader = PartitionNeighborLoader(graph, cached, y, seeds, ...)

The rows a batch receives are copies of the owners' rows whichever way they come, so a cached
run equals an uncached one bit for bit. The loader gathers a batch's features on its own
thread one batch ahead of training, so a batch's misses are fetched while the step before it
runs (``stats["loader_thread_fetches"]`` counts the fetches made there).

Which rows: ``hot_by_degree`` ranks the remote vertices by out-degree (an in-neighbour sampler
reaches a vertex once per out-edge into the frontier, so out-degree is its expected share of
the samples); ``hot_by_sampling`` counts how often one epoch of this rank's own sampling (no
features, no communication) reads each remote vertex. ``capacity_rows`` turns a size in rows,
bytes or a fraction of the remote rows into a row count.
"""
from __future__ import annotations

import threading
from typing import Optional

import torch

from ..graph import Graph


def capacity_rows(features, rows: Optional[int] = None, nbytes: Optional[int] = None,
                  fraction: Optional[float] = None) -> int:
    """Cache rows for exactly one of: ``rows``; ``nbytes`` (of feature rows); ``fraction`` of the
    rows this rank does not own."""
    given = [k for k, v in (("rows", rows), ("nbytes", nbytes), ("fraction", fraction)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"give the cache size as exactly one of rows, nbytes or fraction, got {given or 'none'}")
    remote = int(features.assignment.numel()) - int(features.owned.numel())
    if rows is not None:
        n = int(rows)
    elif nbytes is not None:
        row_bytes = features.rows[0].numel() * features.rows.element_size() if features.rows.shape[0] else 1
        n = int(nbytes) // max(1, row_bytes)
    else:
        if not 0.0 <= float(fraction) <= 1.0:
            raise ValueError(f"the cache fraction must be in [0, 1], got {fraction}")
        n = int(round(float(fraction) * remote))
    if n < 0:
        raise ValueError(f"the cache size must be >= 0 rows, got {n}")
    return min(n, remote)


def _top_remote(score: torch.Tensor, features, capacity: int) -> torch.Tensor:
    """The ``capacity`` remote vertices of highest score (ties: lower id first), ascending."""
    remote = features.assignment != features.rank
    score = torch.where(remote, score.to(torch.float64), torch.full_like(score, -1, dtype=torch.float64))
    # a stable sort on the negated score keeps ties in id order: the same choice on any machine
    order = torch.sort(-score, stable=True).indices[:capacity]
    order = order[score[order] > 0] if capacity else order
    return torch.sort(order).values


def hot_by_degree(graph: Graph, features, capacity: int) -> torch.Tensor:
    """The ``capacity`` remote vertices of highest out-degree."""
    src = graph.edge_index[0]
    return _top_remote(torch.bincount(src, minlength=graph.num_nodes), features, capacity)


def hot_by_sampling(loader, features, capacity: int, epoch: int = 0) -> torch.Tensor:
    """The ``capacity`` remote vertices that ``loader``'s batches of ``epoch`` read most often
    (the batches are sampled here and dropped: no features are fetched)."""
    counts = torch.zeros(features.assignment.numel(), dtype=torch.long)
    for i, seeds in enumerate(loader._batches(epoch)):
        counts += torch.bincount(loader._sample(epoch, i, seeds).input_nodes, minlength=counts.numel())
    return _top_remote(counts, features, capacity)


class CachedFeatures:
    """A PartitionedFeatures whose ``fetch`` serves cached remote rows locally (module doc).
    ``hot``: the global ids to cache (remote vertices; every rank passes its own). Building it
    is a collective (the cache is filled with one fetch)."""

    def __init__(self, features, hot: torch.Tensor):
        hot = torch.unique(torch.as_tensor(hot, dtype=torch.long).view(-1))
        if hot.numel() and (hot.min() < 0 or hot.max() >= features.assignment.numel()):
            raise ValueError(f"hot vertex ids must be in [0, {features.assignment.numel()})")
        if (features.assignment[hot] == features.rank).any():
            raise ValueError("hot vertices must be remote: this rank owns some of them already")
        self.base = features
        self.assignment, self.owned, self.rank, self.world = features.assignment, features.owned, features.rank, \
            features.world
        self.rows = features.rows
        self.cached_ids = hot
        self.cache = features.fetch(hot)  # every rank fills its cache at once: one collective
        # slot of each vertex in the cache, -1 when not cached
        self.slot = torch.full((features.assignment.numel(),), -1, dtype=torch.long)
        self.slot[hot] = torch.arange(hot.numel())
        self.stats = {"remote_rows": 0, "hits": 0, "misses": 0, "bytes_received": 0, "fetches": 0,
                      "loader_thread_fetches": 0, "cache_rows": int(hot.numel()),
                      "cache_bytes": int(self.cache.numel() * self.cache.element_size()),
                      "fill_bytes": int(self.cache.numel() * self.cache.element_size())}

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of ``ids``: cached ones from the cache, the rest through the base (a collective)."""
        ids = torch.as_tensor(ids, dtype=torch.long).view(-1)
        slot, hit = lookup(self.slot, ids)
        before = self.base.stats["bytes_received"]
        if bool(hit.any()):
            out = merge(self.cache, slot, hit, self.base.fetch(ids[~hit]))
        else:  # nothing cached (one rank, or no hot row asked): the base's rows as they come
            out = self.base.fetch(ids)
        remote = int((self.assignment[ids] != self.rank).sum())
        hits = int(hit.sum())
        s = self.stats
        s["remote_rows"] += remote
        s["hits"] += hits
        s["misses"] += remote - hits
        s["bytes_received"] += self.base.stats["bytes_received"] - before
        s["fetches"] += 1
        if threading.current_thread().name == "seastar-loader":
            s["loader_thread_fetches"] += 1
        return out


# The local work of a cached fetch besides the base's (the planner times these same steps).
def lookup(slots: torch.Tensor, ids: torch.Tensor) -> tuple:
    """(slot of each id in the cache, -1 if none; which ids are cached)."""
    slot = slots[ids]
    return slot, slot >= 0


def merge(cache: torch.Tensor, slot: torch.Tensor, hit: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
    """The rows of a batch: cached ones from ``cache``, the others (``rest``, in order) as fetched."""
    out = rest.new_empty((slot.numel(),) + tuple(cache.shape[1:]))
    out[hit] = cache[slot[hit]]
    out[~hit] = rest
    return out


def epoch_report(stats: dict, before: dict) -> dict:
    """Remote rows, hits, misses, bytes and hit rate between two snapshots of ``stats``."""
    d = {k: stats[k] - before.get(k, 0) for k in ("remote_rows", "hits", "misses", "bytes_received")
         if k in stats}
    d.setdefault("hits", 0)
    d["hit_rate"] = d["hits"] / d["remote_rows"] if d.get("remote_rows") else 0.0
    return d
