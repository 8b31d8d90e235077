"""Data-parallel mini-batch training: every rank holds the whole graph, samples from its own
share of the training seeds, and DistributedDataParallel averages the gradients.

    ds = shared_dataset("/dev/shm/cora.pt", make=lambda: ss.datasets.load("cora"))
    loader = DistributedNeighborLoader(ds, [25, 10], batch_size=512, input_nodes=ds.train_mask)
    model = torch.nn.parallel.DistributedDataParallel(model)
    for epoch in range(E):
        for batch in loader: ...          # the same number of batches on every rank

Shares (``SeedShards``): each epoch one permutation of the training seeds, the same on every
rank (seeded by the epoch), dealt out round-robin: the shares are disjoint, cover every seed
once, and differ in size by at most one; every rank cuts its share into the same number of
batches, so every rank takes the same number of optimizer steps (DDP's all-reduce per step
never waits for a rank that has run out).

Sharing (``shared_dataset``): the first process of each machine writes the edge list (with its
edge types, if any), features, labels and masks to one file; every process of the machine maps it
(``torch.load(mmap=True)``), so the features exist once in memory (the page cache), not once
per process. The sampler's index (the C++ graph's CSC/CSR arrays) is built by each process
from the mapped edge list.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional

import torch
import torch.distributed as dist

from .. import _batch_transfer
from ..graph import Graph
from ..loader import NeighborLoader, _mix
from .partition import load_partition


class SeedShards:
    """Per-epoch seed shares of one rank (see the module doc)."""

    def __init__(self, seeds: torch.Tensor, rank: int, world_size: int, batch_size: int, seed: int = 0):
        seeds = torch.as_tensor(seeds).view(-1).to(torch.long)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of {world_size} processes")
        if seeds.numel() < world_size:
            raise ValueError(f"{seeds.numel()} training seeds cannot be shared by {world_size} ranks (fewer seeds "
                             f"than ranks)")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.seeds, self.rank, self.world, self.batch_size, self.seed = seeds, rank, world_size, batch_size, seed
        largest_share = -(-seeds.numel() // world_size)
        self.num_batches = -(-largest_share // batch_size)

    def share(self, epoch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(_mix(self.seed, epoch))
        order = self.seeds[torch.randperm(self.seeds.numel(), generator=g)]
        return order[self.rank::self.world]

    def batches(self, epoch: int) -> List[torch.Tensor]:
        """``num_batches`` batches (sizes within one of each other) covering this rank's share."""
        return list(torch.tensor_split(self.share(epoch), self.num_batches))

    def order(self, epoch: int) -> torch.Tensor:
        """The epoch's permutation of all seeds (the same on every rank and at any world size)."""
        g = torch.Generator().manual_seed(_mix(self.seed, epoch))
        return self.seeds[torch.randperm(self.seeds.numel(), generator=g)]


def redeal(order: torch.Tensor, consumed: torch.Tensor, rank: int, world_size: int, batch_size: int,
           num_batches: Optional[int] = None) -> List[torch.Tensor]:
    """This rank's batches of the seeds of ``order`` not in ``consumed``, dealt round-robin in
    ``order``'s order over ``world_size`` ranks: what is left of an epoch after a restart with
    another world size. Every rank gets the same number of batches (``num_batches``, by
    default that of the largest share), so DDP's per-step all-reduce stays in step."""
    left = order[~torch.isin(order, consumed.view(-1).to(order.dtype))]
    share = left[rank::world_size]
    if num_batches is None:
        num_batches = -(-(-(-left.numel() // world_size)) // batch_size)
    if num_batches == 0:
        return []
    return list(torch.tensor_split(share, num_batches))


class _Resumable:
    """Resuming a loader mid-epoch after a restart (mixed into the distributed loaders).

    Same world size: the epoch continues at batch ``next_batch`` with exactly the batches and
    sampling seeds the undisturbed run would have used. Another world size: the seeds the
    epoch had not yet consumed (``consumed``, gathered from every rank at the checkpoint) are
    dealt again over the new ranks; their sampling seeds are drawn from a stream of their own,
    keyed by the old world size and position, so they never repeat a batch of the epoch."""

    _redealt = None  # (epoch, batches, salt) while an epoch is re-dealt

    def resume(self, epoch: int, next_batch: int, saved_world: int, consumed: torch.Tensor) -> None:
        if saved_world == self.world_size:
            self._redealt = None
            self.set_epoch(epoch, start=next_batch)
            return
        batches = self._redeal(epoch, consumed)
        self._redealt = (int(epoch), batches, (int(saved_world), int(next_batch)))
        self.set_epoch(epoch)

    def _batches(self, epoch: int) -> List[torch.Tensor]:
        if self._redealt is not None and self._redealt[0] == epoch:
            return self._redealt[1]
        return self._dealt(epoch)

    def _sample_seed(self, epoch: int, index: int) -> int:
        if self._redealt is not None and self._redealt[0] == epoch:
            return _mix(self.seed, epoch, index, self.rank, 1 + self._redealt[2][0], self._redealt[2][1])
        return _mix(self.seed, epoch, index, self.rank)


class DistributedNeighborLoader(_Resumable, NeighborLoader):
    """A NeighborLoader over this rank's SeedShards: ``batch_size`` is per rank (the global
    batch is ``world_size`` times larger); rank and world size default to the process group's.
    Sampling is seeded per (seed, epoch, batch, rank)."""

    def __init__(self, data, num_neighbors, batch_size: int = 1024, input_nodes=None, seed: int = 0,
                 prefetch: int = 2, rank: Optional[int] = None, world_size: Optional[int] = None, **kw):
        super().__init__(data, num_neighbors, batch_size=batch_size, input_nodes=input_nodes, shuffle=True,
                         seed=seed, prefetch=prefetch, **kw)
        self.rank = dist.get_rank() if rank is None else int(rank)
        self.world_size = dist.get_world_size() if world_size is None else int(world_size)
        self.shards = SeedShards(self.seeds, self.rank, self.world_size, self.batch_size, seed)

    def __len__(self) -> int:
        return self.shards.num_batches

    def _dealt(self, epoch: int) -> List[torch.Tensor]:
        return self.shards.batches(epoch)

    def _redeal(self, epoch: int, consumed: torch.Tensor) -> List[torch.Tensor]:
        return redeal(self.shards.order(epoch), consumed, self.rank, self.world_size, self.batch_size)


class SharedDataset:
    """The mapped tensors of ``shared_dataset``: ``graph``, ``x``, ``y``, the masks,
    ``num_classes``, ``num_features``."""

    def __init__(self, d: dict):
        self.__dict__.update(d)
        typed = {}
        if d.get("edge_type") is not None:  # a typed graph (R-GCN): the blocks carry each edge's relation
            typed = dict(edge_type=d["edge_type"], num_edge_types=int(d["num_edge_types"]))
        self.graph = Graph.from_edge_index(d["edge_index"], num_nodes=int(d["num_nodes"]), **typed)


FIELDS = ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")


def shared_dataset(path, make: Callable, local_rank: Optional[int] = None,
                   with_features: bool = True) -> SharedDataset:
    """The dataset ``make()`` returns, written once per machine to ``path`` by its local rank 0
    (``LOCAL_RANK``, as torchrun sets it) and mapped by every process. ``path`` should be on a
    machine-local file system (``/dev/shm`` keeps it in memory). Needs the process group (a
    barrier between writing and mapping). ``with_features=False`` leaves ``x`` out (None), for
    features kept in a partition (PartitionedFeatures)."""
    path = Path(path)
    if local_rank is None:
        local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank() if dist.is_initialized() else 0))
    if local_rank == 0:
        ds = make()
        d = {k: getattr(ds, k) for k in FIELDS}
        if d["x"].is_sparse:
            d["x"] = d["x"].to_dense()
        d["edge_index"] = d["edge_index"].contiguous()
        d.update(num_nodes=int(d["x"].shape[0]), num_classes=int(ds.num_classes), num_features=int(d["x"].shape[1]),
                 name=getattr(ds, "name", "dataset"))
        graph = getattr(ds, "graph", None)
        if graph is not None and graph.has_edge_types:
            d.update(edge_type=graph.edge_type.contiguous(), num_edge_types=int(graph.num_edge_types))
        if not with_features:
            d["x"] = None
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        torch.save(d, tmp)
        os.replace(tmp, path)  # the others never map a half-written file
    if dist.is_initialized():
        dist.barrier()
    if not path.is_file():
        raise FileNotFoundError(f"shared_dataset: {path} is missing after local rank 0 wrote it: is the path on a "
                                f"file system every process of this machine sees?")
    return SharedDataset(torch.load(path, mmap=True, weights_only=True))


class PartitionedFeatures:
    """Rows of a node tensor spread over the ranks by a partition: each rank holds only the
    rows of the vertices it owns, and ``fetch(ids)`` returns any rows, remote ones from their
    owners: ``all_to_all_single`` of the counts, the ids and the rows (on one rank, no exchange:
    every row is local). It is a collective: every rank calls it the same number of times (once
    per batch). It runs in a process group of its own, so a loader thread may fetch while the
    training thread's DDP all-reduces run."""

    def __init__(self, owned_rows: torch.Tensor, owned: torch.Tensor, assignment: torch.Tensor):
        if owned_rows.shape[0] != owned.numel():
            raise ValueError(f"owned_rows has {owned_rows.shape[0]} rows for {owned.numel()} owned vertices")
        self.rows, self.owned, self.assignment = owned_rows, owned.to(torch.long), assignment.to(torch.long)
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        if int(self.assignment.max()) >= self.world:
            raise ValueError(f"the assignment has parts up to {int(self.assignment.max())} but the world size is "
                             f"{self.world}")
        self.group = dist.new_group(backend="gloo")
        self.stats = {"remote_rows": 0, "bytes_received": 0, "fetches": 0}

    @classmethod
    def from_partition(cls, part_dir, field: str = "x") -> "PartitionedFeatures":
        part = load_partition(part_dir, dist.get_rank(), world_size=dist.get_world_size())
        assignment = torch.load(Path(part_dir) / "assignment.pt", weights_only=True)
        return cls(part.node_data[field], part.owned, assignment)

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(ids, dtype=torch.long).view(-1)
        n = self.assignment.numel()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError(f"PartitionedFeatures.fetch: vertex ids must be in [0, {n}), got ids from "
                             f"{int(ids.min())} to {int(ids.max())}")
        if self.world == 1:  # every row is this rank's: no exchange
            self.stats["fetches"] += 1
            if self.owned.numel() == n:  # owned is every vertex in order: a row's id is its index,
                # gathered as a replicated table is (without the GIL, beside the training thread)
                return _batch_transfer.gather_rows(self.rows, ids, False)
            return serve(ids, self.owned, self.rows, self.rank)
        order, wanted, ask = route(ids, self.assignment, self.world)
        asked = torch.empty_like(ask)
        dist.all_to_all_single(asked, ask, group=self.group)
        ask_l, asked_l = ask.tolist(), asked.tolist()
        requested = torch.empty(sum(asked_l), dtype=torch.long)
        dist.all_to_all_single(requested, wanted, asked_l, ask_l, group=self.group)
        send = serve(requested, self.owned, self.rows, self.rank)
        got = send.new_empty((ids.numel(),) + tuple(self.rows.shape[1:]))
        dist.all_to_all_single(got, send, ask_l, asked_l, group=self.group)
        out = place(got, order)
        remote = ids.numel() - ask_l[self.rank]
        self.stats["remote_rows"] += remote
        self.stats["bytes_received"] += remote * (got[0].numel() * got.element_size() if got.numel() else 0)
        self.stats["fetches"] += 1
        return out


# The local work of a fetch, apart from its exchanges (the planner times these same steps).
def route(ids: torch.Tensor, assignment: torch.Tensor, world: int) -> tuple:
    """(order, wanted, ask): ``ids`` sorted by owner rank (``wanted = ids[order]``) and how many
    each rank is asked for."""
    owner = assignment[ids]
    order = torch.argsort(owner, stable=True)
    return order, ids[order].contiguous(), torch.bincount(owner, minlength=world)


def serve(requested: torch.Tensor, owned: torch.Tensor, rows: torch.Tensor, rank: int) -> torch.Tensor:
    """The rows of ``requested`` (global ids) among this rank's ``owned`` (sorted) vertices."""
    pos = torch.searchsorted(owned, requested)
    if requested.numel() and (pos.max() >= owned.numel() or
                              (owned[pos.clamp(max=owned.numel() - 1)] != requested).any()):
        raise ValueError(f"rank {rank} was asked for rows it does not own: the ranks use different partitions")
    return rows.index_select(0, pos).contiguous()


def place(got: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """The received rows (in owner order) back in the order the ids were asked in."""
    out = torch.empty_like(got)
    out[order] = got
    return out


class PartitionNeighborLoader(_Resumable, NeighborLoader):
    """Mini-batches of this rank's own training vertices (a part's owned seeds, shuffled per
    epoch), sampled on the whole graph structure, with the input features fetched through
    ``features`` (a PartitionedFeatures: local rows read, remote ones received). Every rank
    runs the same number of batches: that of the rank with the most seeds."""

    def __init__(self, graph: Graph, features: PartitionedFeatures, y: torch.Tensor, seeds: torch.Tensor,
                 num_neighbors, batch_size: int = 1024, seed: int = 0, prefetch: int = 2, **kw):
        if kw.get("x_in_place"):
            raise ValueError("PartitionNeighborLoader fetches each batch's input rows from the partitions, so it has "
                             "no whole feature table to read in place: x_in_place must be False")
        super().__init__((graph, None, None), num_neighbors, batch_size=batch_size, input_nodes=seeds, shuffle=True,
                         seed=seed, prefetch=prefetch, **kw)
        self.features, self.labels = features, y
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        most = torch.tensor([self.seeds.numel()])
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        if self.seeds.numel() == 0:
            raise ValueError(f"rank {self.rank} owns no training vertex: partition with balance_training=True")
        self.num_batches = -(-int(most) // self.batch_size)

    def __len__(self) -> int:
        return self.num_batches

    def _dealt(self, epoch: int) -> List[torch.Tensor]:
        return list(torch.tensor_split(self._order(epoch), self.num_batches))

    def _redeal(self, epoch: int, consumed: torch.Tensor) -> List[torch.Tensor]:
        # the seeds are this rank's own part's (the new partition's): what is left of them,
        # in as many batches as the rank with the most left needs (a collective)
        left = self._order(epoch)
        left = left[~torch.isin(left, consumed.view(-1))]
        most = torch.tensor([left.numel()])
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        n = -(-int(most) // self.batch_size)
        return list(torch.tensor_split(left, n)) if n else []

    def _gather(self, b):
        b.x = self.features.fetch(b.input_nodes)  # every rank fetches its batches in order: a collective
        b.y = self.labels.index_select(0, b.seed_nodes)
        return b
