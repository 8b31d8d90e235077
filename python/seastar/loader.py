"""Mini-batch loading: neighbour sampling into bipartite blocks, run ahead of training::

    loader = ss.loader.NeighborLoader(data, num_neighbors=[15, 10], batch_size=1024)
    for batch in loader:                      # a MiniBatch
        h = batch.x                           # features of batch.input_nodes
        for conv, block in zip(convs, batch.blocks):
            h = conv(block, h)                # block: bipartite ss.Graph, h: [num_src, F] -> [num_dst, F']
        loss = F.cross_entropy(h, batch.y)

``num_neighbors[k]`` is the fanout of hop k from the seeds (PyTorch Geometric's convention), so
the last layer's block (``blocks[-1]``, whose destinations are the seeds) was sampled with
``num_neighbors[0]``. Every block's destinations are the first ``num_dst`` of its sources.
Sampling (C++, parallel, without the GIL) runs on a background thread up to ``prefetch``
batches ahead, and feature gathering one batch ahead (a batch's rows of ``x`` are most of its
memory); ``loader.stats`` says how long they took and how long training waited for them.

``subgraph=True`` yields PyTorch Geometric's mini-batches instead: one square graph
(``batch.graph``) of every sampled vertex, the seeds first, holding the sampled edges and no
others (PyG's ``NeighborLoader`` with its default ``subgraph_type="directional"``: each vertex's
in-neighbours are sampled once, at the hop that reaches it, with ``num_neighbors[k]`` at hop k).
Every layer runs on it unchanged, on all its vertices, and the seeds' outputs are the first
``batch_size`` rows::

    loader = ss.loader.NeighborLoader(data, num_neighbors=[-1, -1], batch_size=1024, subgraph=True)
    for batch in loader:
        out = model(batch.graph, batch.x)[:batch.batch_size]   # batch.x: rows of batch.input_nodes
        loss = F.cross_entropy(out, batch.y)                    # batch.y: the seeds' labels

With full fanouts (-1) a K-layer model's outputs at the seeds equal the whole graph's when the
subgraph holds enough hops: K for layers whose output at a vertex reads only its in-edges
(SAGEConv, GINConv, GraphConv, GATConv, RGCNConv, HGTConv), K + 1 for GCNConv and APPNP (K steps), whose
normalisation at a vertex also reads its in-neighbours' degrees, and a vertex's degree in the
subgraph is its whole degree only if its in-edges were sampled (the outermost hop's vertices
have none).

``x_in_place=True`` gathers nothing of ``x``: ``blocks[0]`` reads its sources as global vertex
ids (``Graph.with_global_sources``; ``num_src`` is the graph's vertex count) and ``batch.x`` is
the loader's ``x`` itself. Layers that aggregate their input before transforming it (SAGEConv
with ``mean`` / ``sum`` / ``max`` / ``min`` into at least as many channels, GINConv) then read
the table in place; the others (GATConv, RGCNConv, SAGEConv projecting first, ...) gather the
rows they need inside the layer, on the training thread. It saves one batch's rows of ``x`` per
batch in flight.

``device="cuda"`` (or ``"cuda:N"``) puts each batch on the GPU ahead of the step: the loader
thread gathers rows into pinned host memory (``pin_memory``, torch DataLoader's name; on by
default for a CUDA device) and issues the copies on a side stream; the training stream waits for
them through an event, so the step itself never waits for the host (seastar/_batch_transfer.py).
``x`` (and ``y``) may live on that device already: the rows are then gathered there. With
``x_in_place=True`` a CUDA ``x`` is read in place, and so is a CPU ``x`` in pinned memory
(``x.pin_memory()``): the kernels read its rows over the bus through unified addressing, so a
feature table larger than the GPU trains with nothing gathered on the host, at the price of
reading a row over the bus once per edge that reads it (a gathering layer reads each row once).
``device="cpu"`` runs the same path with no stream and no copy.
"""
from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

import torch

from . import _C
from . import _batch_transfer
from .graph import Graph

log = logging.getLogger("seastar")

_MASK64 = (1 << 63) - 1


__all__ = ["NeighborLoader", "MiniBatch", "sample_blocks", "sample_subgraph", "sizes_vary", "layerwise_inference"]


def _mix(*parts: int) -> int:
    """A 63-bit seed from integers (the sampler's counter-based RNG is keyed by it)."""
    h = 0x243F6A8885A308D3
    for p in parts:
        h = ((h ^ (int(p) & _MASK64)) * 0x100000001B3 + 0x9E3779B97F4A7C15) & _MASK64
        h ^= h >> 29
    return h


@dataclass
class MiniBatch:
    """One sampled mini-batch.

    ``blocks`` are bipartite graphs, outermost layer first (``blocks[0]`` reads ``x``);
    ``input_nodes`` are the global ids of ``blocks[0]``'s sources (the rows of ``x``, or, with
    ``x_in_place``, the rows of the whole table that ``blocks[0]`` reads);
    ``seed_nodes`` the global ids of the last block's destinations (the rows of the output and
    of ``y``); ``edge_ids[i]`` the original edge id of each of ``blocks[i]``'s edges, to select
    edge features. With ``subgraph=True``: ``graph`` (see ``sample_subgraph``)."""

    blocks: List[Graph]
    input_nodes: torch.Tensor
    seed_nodes: torch.Tensor
    edge_ids: List[torch.Tensor]
    x: Optional[torch.Tensor] = None
    y: Optional[torch.Tensor] = None
    src_nodes: List[torch.Tensor] = field(default_factory=list)  # global ids of each block's sources
    # NeighborLoader(subgraph=True): the square subgraph of the sampled vertices (``input_nodes``,
    # the seeds first); ``blocks`` is then empty and ``edge_ids`` holds one tensor, its edges' ids
    graph: Optional[Graph] = None

    @property
    def batch_size(self) -> int:
        return int(self.seed_nodes.numel())

    def to(self, device) -> "MiniBatch":
        for b in self.blocks + ([self.graph] if self.graph is not None else []):
            b.to(device)
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return MiniBatch(self.blocks, self.input_nodes, self.seed_nodes, self.edge_ids, move(self.x), move(self.y),
                         self.src_nodes, self.graph)


def sizes_vary(batch: "MiniBatch") -> "MiniBatch":
    """Tells torch.compile that a batch's sizes vary from batch to batch (``maybe_mark_dynamic``
    on its blocks' sizes and the rows of ``x`` and ``y``), so that its first compile is already
    the one with symbolic sizes: without it, ``dynamic=None`` makes symbolic only the sizes it has
    seen change, and a size that first changes at a later batch compiles once more."""
    mark = torch._dynamo.maybe_mark_dynamic
    for block in batch.blocks if batch.blocks else [batch.graph]:
        if block is None:
            continue
        t = block._in
        for r in {id(x): x for x in (t.src_rows, t.dst_rows, t.edge_rows)}.values():
            mark(r, 0)
    for t in (batch.x, batch.y):
        if isinstance(t, torch.Tensor) and t.dim() > 0:
            mark(t, 0)
    return batch


def sample_blocks(graph: Graph, seeds: torch.Tensor, num_neighbors: Sequence, seed: int = 0,
                  replace: bool = False, weights: Optional[torch.Tensor] = None,
                  expand_once: bool = False) -> MiniBatch:
    """Samples ``len(num_neighbors)`` hops of in-neighbours of ``seeds`` (one call of the C++
    sampler); returns a MiniBatch without features. ``num_neighbors[k]`` is an int (-1: every
    neighbour) or, for a graph with edge types, a list of one fanout per relation.
    ``expand_once``: a vertex's in-neighbours are sampled only at the hop that reaches it (the
    blocks of ``sample_subgraph``; a later block gives it no in-edges)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a seastar.Graph, got {type(graph).__name__}")
    fanouts = [[int(k)] if not isinstance(k, (list, tuple)) else [int(x) for x in k] for k in num_neighbors]
    seeds = torch.as_tensor(seeds)
    hops = _C.sample_neighbors(graph._g, seeds, fanouts, int(seed) & _MASK64, bool(replace), weights,
                               expand_once=bool(expand_once))
    hops.reverse()  # the sampler returns the innermost hop first; layers consume outermost first
    blocks = [Graph(g) for g, _, _ in hops]
    src_nodes = [nodes for _, nodes, _ in hops]
    return MiniBatch(blocks=blocks, input_nodes=src_nodes[0], seed_nodes=seeds.to(torch.long),
                     edge_ids=[eid for _, _, eid in hops], src_nodes=src_nodes)


def sample_subgraph(graph: Graph, seeds: torch.Tensor, num_neighbors: Sequence, seed: int = 0,
                    replace: bool = False, weights: Optional[torch.Tensor] = None) -> MiniBatch:
    """PyG's mini-batch: the square subgraph (``MiniBatch.graph``) of the vertices sampled in
    ``len(num_neighbors)`` hops from ``seeds``, each vertex's in-neighbours sampled once, at the
    hop that reaches it; its vertex ``i`` is ``input_nodes[i]`` (the seeds first, then each
    hop's new vertices in the order they were reached), its edges the sampled ones (the first
    hop's first), ``edge_ids[0]`` their original ids. Node and edge types come along."""
    b = sample_blocks(graph, seeds, num_neighbors, seed, replace, weights, expand_once=True)
    # expand_once: each block holds only the in-edges of the vertices its hop reached, in the
    # local ids of the outermost block's sources (every block's sources are a prefix of them)
    ei = torch.cat([blk.edge_index for blk in reversed(b.blocks)], dim=1)
    eid = torch.cat(list(reversed(b.edge_ids)))
    n = int(b.input_nodes.numel())
    types = {}
    if graph.has_node_types:
        types.update(node_type=graph.node_type[b.input_nodes], num_node_types=graph.num_node_types)
    if graph.has_edge_types:
        types.update(edge_type=graph.edge_type[eid], num_edge_types=graph.num_edge_types)
    sub = Graph.from_edge_index(ei, num_nodes=n, **types)
    return MiniBatch(blocks=[], input_nodes=b.input_nodes, seed_nodes=b.seed_nodes, edge_ids=[eid],
                     src_nodes=[b.input_nodes], graph=sub)


class NeighborLoader:
    """Iterates mini-batches of seed vertices with sampled neighbourhoods (see the module doc).

    ``data``: a dataset object (``graph``, ``x``, ``y``) or a ``(graph, x, y)`` triple (``x`` or
    ``y`` may be None). ``input_nodes``: the seed vertices (None: all; a bool mask or ids).
    Batches differ per epoch (each ``iter()`` is a new epoch) and are the same for the same
    ``seed`` at any thread count. ``prefetch=0`` samples on the calling thread. ``x_in_place``,
    ``subgraph``, ``device`` (where batches go; None: where ``x`` or ``y`` is when that is a GPU,
    else the CPU) and ``pin_memory`` (None: pinned when ``device`` is CUDA): see the module doc.
    """

    def __init__(self, data, num_neighbors: Sequence, batch_size: int = 1024, input_nodes=None,
                 shuffle: bool = True, drop_last: bool = False, seed: int = 0, prefetch: int = 2,
                 replace: bool = False, weights: Optional[torch.Tensor] = None, x_in_place: bool = False,
                 subgraph: bool = False, device=None, pin_memory: Optional[bool] = None):
        if isinstance(data, (tuple, list)):
            if len(data) != 3:
                raise ValueError("data must be a dataset object or a (graph, x, y) triple")
            graph, x, y = data
        else:
            graph, x, y = data.graph, getattr(data, "x", None), getattr(data, "y", None)
        if not isinstance(graph, Graph):
            raise TypeError(f"the loader's graph must be a seastar.Graph, got {type(graph).__name__}")
        if graph.is_bipartite:
            raise ValueError("NeighborLoader samples a square graph, got a bipartite one")
        n = graph.num_nodes
        for name, t in (("x", x), ("y", y)):
            if t is not None and (not isinstance(t, torch.Tensor) or t.shape[0] != n):
                raise ValueError(f"{name} must be a tensor with one row per vertex ({n}), got "
                                 f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if not num_neighbors:
            raise ValueError("num_neighbors must give at least one fanout")
        if x_in_place and graph.has_node_types:
            raise ValueError("x_in_place=True needs a graph without node types (a block's node types are its "
                             "sources'); gather the rows instead (x_in_place=False)")
        if x_in_place and subgraph:
            raise ValueError("x_in_place=True reads the input block's sources from the whole table, but subgraph=True "
                             "yields no blocks: a subgraph's layers read batch.x, the rows of its own vertices")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if int(prefetch) < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        if device is None:  # a table already on a GPU takes its batches there
            device = next((t.device for t in (x, y) if isinstance(t, torch.Tensor) and t.device.type == "cuda"), None)
        self.device = _batch_transfer.resolve_device(device)
        self.pin_memory = _batch_transfer.resolve_pin_memory(pin_memory, self.device)
        for name, t in (("x", x), ("y", y)):
            if t is not None and t.device.type != "cpu" and t.device != self.device:
                raise ValueError(f"{name} is on {t.device} but the loader's device is {self.device}: pass "
                                 f"device={str(t.device)!r}, or keep {name} on the CPU")
        # what blocks[0] reads with x_in_place (on a CUDA device: x itself, or a CUDA view of a pinned x)
        x_table = _batch_transfer.table_for_device("x", x, self.device, bool(x_in_place))
        if input_nodes is None:
            seeds = torch.arange(n)
        else:
            t = torch.as_tensor(input_nodes).cpu()  # the sampler reads seeds on the host
            if t.dtype == torch.bool:
                if t.numel() != n:
                    raise ValueError(f"an input_nodes mask needs {n} entries, got {t.numel()}")
                seeds = t.nonzero().view(-1)
            else:
                seeds = t.view(-1).to(torch.long)
                if seeds.numel() and (seeds.min() < 0 or seeds.max() >= n):
                    raise ValueError(f"input_nodes must be vertex ids in [0, {n})")
                if torch.unique(seeds).numel() != seeds.numel():
                    raise ValueError("input_nodes holds a vertex twice")
        self.graph, self.x, self.y = graph, x, y
        self.num_neighbors = list(num_neighbors)
        self.batch_size, self.shuffle, self.drop_last = int(batch_size), bool(shuffle), bool(drop_last)
        self.seed, self.prefetch, self.replace, self.weights = int(seed), int(prefetch), bool(replace), weights
        self.seeds = seeds
        self.x_in_place, self.subgraph = bool(x_in_place), bool(subgraph)
        self._x_table = x_table
        self._transfer = _batch_transfer.BatchTransfer(self.device, x_table, y)
        self.epoch = 0
        self.start = 0  # the first batch index of the next iteration (resuming mid-epoch)
        self.stats = {}

    def __len__(self) -> int:
        n = self.seeds.numel()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """The epoch the next iteration samples (iterating advances it by one), from its batch
        ``start`` on (a run resumed mid-epoch: batch ``i`` is sampled as it would have been)."""
        if int(start) < 0:
            raise ValueError(f"start must be a batch index >= 0, got {start}")
        self.epoch, self.start = int(epoch), int(start)

    def _order(self, epoch: int) -> torch.Tensor:
        if not self.shuffle:
            return self.seeds
        g = torch.Generator().manual_seed(_mix(self.seed, epoch))
        return self.seeds[torch.randperm(self.seeds.numel(), generator=g)]

    def _batches(self, epoch: int) -> List[torch.Tensor]:
        """The seed vertices of each batch of ``epoch``."""
        order = self._order(epoch)
        batches = [order[i:i + self.batch_size] for i in range(0, len(self) * self.batch_size, self.batch_size)]
        return [s for s in batches if s.numel()]

    def _sample_seed(self, epoch: int, index: int) -> int:
        return _mix(self.seed, epoch, index)

    def _sample(self, epoch: int, index: int, seeds: torch.Tensor) -> MiniBatch:
        sample = sample_subgraph if self.subgraph else sample_blocks
        return sample(self.graph, seeds, self.num_neighbors, self._sample_seed(epoch, index), self.replace,
                             self.weights)

    def _gather(self, b: MiniBatch) -> MiniBatch:
        """Rows of ``x`` and ``y`` on the host (none of a table on the device, which the transfer
        gathers there). Subclasses fetch features their own way here."""
        if self.x_in_place:  # the first layer reads x itself through global source ids
            b.blocks[0] = b.blocks[0].with_global_sources(b.input_nodes, self.graph.num_nodes)
            b.x = self._x_table
        elif self.x is not None and self.x.device.type == "cpu":  # no GIL held (index_select elsewhere)
            b.x = _batch_transfer.gather_rows(self.x, b.input_nodes, self.pin_memory)
        if self.y is not None and self.y.device.type == "cpu":
            b.y = _batch_transfer.gather_rows(self.y, b.seed_nodes, self.pin_memory)
        return b

    def _prepare(self, b: MiniBatch) -> "_batch_transfer.InFlight":
        """The batch's features gathered and its copies to ``device`` issued (``_batch_transfer``)."""
        b = self._gather(b)
        if self.pin_memory:  # the ids go to the device too
            b.input_nodes, b.seed_nodes = b.input_nodes.pin_memory(), b.seed_nodes.pin_memory()
        return self._transfer.start(b)

    def _make(self, epoch: int, index: int, seeds: torch.Tensor) -> MiniBatch:
        return self._transfer.finish(self._prepare(self._sample(epoch, index, seeds)))

    def __iter__(self):
        for b in self._epoch():
            yield sizes_vary(b)

    def _epoch(self):
        epoch, start = self.epoch, self.start
        self.epoch, self.start = self.epoch + 1, 0
        batches = self._batches(epoch)
        if start > len(batches):
            raise ValueError(f"epoch {epoch} has {len(batches)} batches; cannot start at batch {start}")
        self.stats = {"epoch": epoch, "batches": len(batches) - start, "sample_s": 0.0, "wait_s": 0.0}
        self._transfer.begin()
        if self.prefetch == 0:
            for i in range(start, len(batches)):
                t0 = time.perf_counter()
                b = self._make(epoch, i, batches[i])
                dt = time.perf_counter() - t0
                self.stats["sample_s"] += dt
                self.stats["wait_s"] += dt
                yield b
            return
        yield from self._iter_prefetched(epoch, batches, start)

    def _iter_prefetched(self, epoch: int, batches, start: int = 0):
        # `prefetch` slots: the producer takes one before it samples a batch and the training
        # loop gives it back when it takes that batch, so at most `prefetch` batches exist beside
        # the one being trained on (a bounded queue alone lets one more wait in the producer).
        # Of those, one at most has its features gathered: a batch's blocks are small, its rows
        # of x are most of its memory, and gathering one batch ahead still overlaps the step.
        q: queue.Queue = queue.Queue()
        slots = threading.Semaphore(self.prefetch)
        gathered = threading.Semaphore(1)
        freed = threading.Event()  # set by the training loop after it gave back a slot
        stop = threading.Event()
        done = object()

        def produce():
            try:
                # sample on the cores training leaves free (at least one): an OpenMP team as wide as
                # the machine would take the cores of the training step it runs beside
                _C.set_local_threads(max(1, _cores() - torch.get_num_threads()))
                sampled = collections.deque()  # sampled, not yet gathered
                i = start
                while i < len(batches) or sampled:
                    if stop.is_set():
                        return
                    freed.clear()  # before trying: a slot given back from here on sets it again
                    t0 = time.perf_counter()
                    if sampled and gathered.acquire(blocking=False):  # what training waits for first
                        q.put(self._prepare(sampled.popleft()))
                    elif i < len(batches) and slots.acquire(blocking=False):
                        sampled.append(self._sample(epoch, i, batches[i]))
                        i += 1
                    else:
                        freed.wait(timeout=0.1)
                        continue
                    self.stats["sample_s"] += time.perf_counter() - t0
                q.put(done)
            except BaseException as exc:  # handed to the consumer, which re-raises it
                q.put(exc)

        worker = threading.Thread(target=produce, name="seastar-loader", daemon=True)
        worker.start()
        try:
            while True:
                t0 = time.perf_counter()
                item = q.get()
                self.stats["wait_s"] += time.perf_counter() - t0
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                slots.release()
                gathered.release()
                freed.set()
                item = self._transfer.finish(item)  # the training stream waits for the batch's copies
                yield item
                del item  # the batch trained on is not kept while the next one is awaited
        finally:
            stop.set()
            freed.set()  # wakes a producer waiting for a slot
            worker.join()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def layerwise_inference(layers: Sequence, graph: Graph, x: torch.Tensor, batch_size: int = 4096,
                        between=None, device=None) -> torch.Tensor:
    """Full-neighbourhood inference one layer at a time, in chunks of destinations: for graphs
    whose full forward pass does not fit at once. ``layers[i](block, h)`` maps source rows of a
    bipartite block to its destinations; ``between(i, h)`` (e.g. an activation) runs after
    every layer but the last. ``device``: where the layers run (default: ``x``'s device); a
    chunk's rows of ``x`` go there, so ``x`` may stay on the host. Returns [num_nodes, F_out]
    on that device. Runs under ``torch.no_grad()``."""
    if not isinstance(graph, Graph) or graph.is_bipartite:
        raise ValueError("layerwise_inference needs a square seastar.Graph")
    if x.shape[0] != graph.num_nodes:
        raise ValueError(f"x has {x.shape[0]} rows but the graph has {graph.num_nodes} vertices")
    n = graph.num_nodes
    device = x.device if device is None else _batch_transfer.resolve_device(device)
    h = x
    with torch.no_grad():
        for i, layer in enumerate(layers):
            outs = []
            for lo in range(0, n, batch_size):
                seeds = torch.arange(lo, min(n, lo + batch_size))
                b = sample_blocks(graph, seeds, [-1])
                rows = h.index_select(0, b.input_nodes.to(h.device)).to(device)
                outs.append(layer(b.blocks[0], rows))
            h = torch.cat(outs) if outs else h.new_zeros((0,) + h.shape[1:], device=device)
            if between is not None and i + 1 < len(layers):
                h = between(i, h)
    return h
