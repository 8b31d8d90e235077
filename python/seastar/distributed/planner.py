"""Picks how to train on ``world_size`` processes from a cost model of time and memory.

    p = seastar.distributed.plan(ds, world_size=2, model_spec={"kind": "sage", "hidden": 32},
                                 memory_per_process=4096)
    print(p.table())          # every candidate: epoch time, peak memory per process, why (not)
    p.choice                  # {"mode": "minibatch", "features": "shared", ...}

Candidates: mini-batch with replicated (mapped) features; mini-batch with partitioned
features and a cache of hot remote rows; full-graph partition-parallel at ``world_size``
parts. The choice is the fastest predicted epoch among those that fit in
``memory_per_process`` (MB; None: all fit).

The model's inputs are measured: the machine's rates come from ``calibrate`` (written into
the plan), the data's sizes from the data itself, and a mini-batch's sizes from sampling a
few batches of the data with the model's fanouts. Per epoch, with ``k`` processes:

* compute of a layer: ``aggregated edge x features / aggregation_rate + multiply-adds /
  gemm_rate`` (both rates are forward and backward), scaled and offset by a fit of real
  optimizer steps of the model's own layers on two random graphs (``fit_step``): the estimate
  where a step is not timed;
* all-reduce of ``B`` bytes (ring): ``2 (k-1) latency + 2 (k-1)/k B / bandwidth``; an
  all-to-all sending ``B`` bytes per rank: ``(k-1) latency + B / bandwidth``;
* ``k`` processes on a machine: a step of ``t`` seconds alone takes ``scale x t +
  loop_stall_s``. The scale is the model's own (``measure_scales``: its mini-batch loop over
  the data, and its full-graph step over one part of it, each timed in one process alone and
  then in ``k`` spawned processes at once): a step of arithmetic loses the cores' share and
  no more, one of memory traffic loses more, and the data's structure sets the balance. The
  stall is the wait at an all-reduce, from ``calibrate``'s fit ``together = loop_scale x alone
  + loop_stall_s`` of a small training loop in ``k`` processes at once with an all-reduce per
  step, against one alone, at two batch sizes; without the model's scale, ``loop_scale``
  stands in. Without either: ``t`` times the share of cores the processes want beyond the
  machine's, times ``1 + skew`` (the measured wait for the slowest rank at a collective);
* mini-batch: ``ceil(ceil(T / k) / b)`` steps, each slowed as above (``minibatch_scale``)
  plus its gradients' all-reduce, after the wait for the epoch's first batch. The step is the
  training loop measured on the data (``measure_minibatch_loop``: the loader's thread sampling
  and gathering beside steps of the model's own layers with its dropout; the mean time from
  batch to batch), and the first batch's wait is the loader's time for a batch alone. Without them:
  the fit's step plus ``edges / sampling_rate + bytes / gather_rate``, in turn;
* partitioned features: each batch also fetches, in turn with the step: the fetch's local
  work (``measure_fetch_work``: routing, serving, placing and the cache lookup, timed on the
  data's batches; none on one process), two all-to-alls of counts and ids and one of the
  missed rows, the first of which waits for the slowest rank (the stall, as at the gradients'
  all-reduce). Remote input rows are ``(k-1)/k`` of a batch's inputs; the cache's hit rate is
  the share of the remote vertices' out-edges that the cached (highest out-degree) vertices
  hold: a sampler reaches a vertex once per out-edge into the frontier;
* full-graph: one step over the largest part (``E / k`` in-edges; ``N / k`` owned rows and its
  halo; with k processes on a machine, a step on one part is timed, ``measure_scales``; else a
  step of the model's layers over the whole graph, ``measure_fullgraph_step``; either is scaled
  to the part by the rates' estimate of each), a halo exchange forward and backward
  per layer after the first, one all-reduce of the gradients. The step slows as above, by
  ``fullgraph_scale``, and the stall is paid at each of its collectives: the gradients'
  all-reduce and the halo exchanges.
  The halo is the partition's own (``partition_report``) when given, else its expectation
  under a random assignment: ``sum over u of (k-1)/k (1 - (1 - 1/k)^outdeg(u))``.
* memory per process: the measured process base (torch and seastar) + graph structure
  (edge list and the sampler's CSC/CSR) + the feature rows the process holds + a batch's or
  a part's activations kept for backward + parameters with Adam's two moments.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import statistics
import tempfile
import time
import types
from typing import List, Optional

import torch
import torch.distributed as dist

from .. import nn as ssnn
from ..graph import Graph
from ..loader import NeighborLoader, sample_blocks
from . import launch
from .calibration import _typical, calibrate
from .feature_cache import hot_by_degree, lookup, merge
from .minibatch import place, route, serve

_KINDS = ("sage", "gcn", "gat", "rgcn")


@dataclasses.dataclass
class ModelSpec:
    """What the cost model needs of the model and its training: ``kind`` (sage, gcn, gat,
    rgcn), ``hidden`` width (per head for GAT), ``heads``, ``fanouts``, ``batch_size`` (seeds
    per rank and step), ``dropout`` (between the layers), ``dtype_bytes``, ``cache_fraction``
    (of the remote rows, for the partitioned candidate). ``in_features``, ``classes`` and
    R-GCN's ``relations`` come from the data unless given."""

    kind: str = "sage"
    hidden: int = 32
    dropout: float = 0.5
    heads: int = 1
    fanouts: tuple = (10, 5)
    batch_size: int = 512
    dtype_bytes: int = 4
    cache_fraction: float = 0.1
    in_features: Optional[int] = None
    classes: Optional[int] = None
    relations: Optional[int] = None

    @classmethod
    def of(cls, spec) -> "ModelSpec":
        if isinstance(spec, ModelSpec):
            return spec
        if not isinstance(spec, dict):
            raise TypeError(f"model_spec must be a dict or a ModelSpec, got {type(spec).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec) - names)
        if unknown:
            raise ValueError(f"model_spec has unknown keys {unknown}; known: {sorted(names)}")
        m = cls(**spec)
        if m.kind not in _KINDS:
            raise ValueError(f"model_spec kind must be one of {_KINDS}, got {m.kind!r}")
        m.fanouts = tuple(int(f) for f in m.fanouts)
        for name in ("hidden", "heads", "batch_size", "dtype_bytes"):
            if int(getattr(m, name)) < 1:
                raise ValueError(f"model_spec {name} must be >= 1, got {getattr(m, name)}")
        if not m.fanouts or any(f < 1 for f in m.fanouts):
            raise ValueError(f"model_spec fanouts must be positive, got {m.fanouts}")
        if m.relations is not None and int(m.relations) < 1:
            raise ValueError(f"model_spec relations must be >= 1, got {m.relations}")
        if not 0.0 <= m.dropout < 1.0:
            raise ValueError(f"model_spec dropout must be in [0, 1), got {m.dropout}")
        if not 0.0 <= m.cache_fraction <= 1.0:
            raise ValueError(f"model_spec cache_fraction must be in [0, 1], got {m.cache_fraction}")
        return m


@dataclasses.dataclass
class Plan:
    """The candidates (``rows``), the chosen one (``choice``), and every input of the model."""

    world_size: int
    rows: List[dict]
    choice: dict
    calibration: dict
    inputs: dict

    def table(self) -> str:
        lines = [f"plan for {self.world_size} processes "
                 f"({self.inputs['num_nodes']} vertices, {self.inputs['num_edges']} edges):",
                 "| candidate | epoch, predicted | steps | communication / epoch | peak memory / process | |",
                 "| --- | --- | --- | --- | --- | --- |"]
        for r in self.rows:
            mark = "**chosen**: " if r is self.choice else ""
            lines.append(f"| {r['candidate']} | {r['epoch_s'] * 1e3:.1f} ms | {r['steps']} | "
                         f"{r['comm_bytes'] / 1e6:.2f} MB, {r['comm_s'] * 1e3:.1f} ms | {r['peak_mb']:.0f} MB | "
                         f"{mark}{r['reason']} |")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, default=str)


def _data_arrays(data):
    graph = data.graph
    ei = graph.edge_index
    x = getattr(data, "x", None)
    num_features = int(x.shape[1]) if x is not None else int(getattr(data, "num_features"))
    train = getattr(data, "train_mask", None)
    train_count = int(train.sum()) if train is not None else graph.num_nodes
    y = getattr(data, "y", None)
    classes = int(getattr(data, "num_classes", 0) or (int(y.max()) + 1 if y is not None else 2))
    return graph, ei, num_features, train_count, train, classes


def _features(data, m: ModelSpec) -> Optional[torch.Tensor]:
    """The data's features in the model's dtype (dense), or None when it has none."""
    x = getattr(data, "x", None)
    if x is None:
        return None
    x = x.to_dense() if x.is_sparse else x
    return x.to(torch.float64 if m.dtype_bytes == 8 else torch.float32)


def _widths(m: ModelSpec, f_in: int, classes: int) -> List[tuple]:
    """(in, out, aggregated width, projected rows) per layer; the rows: 'src' (GCN, GAT
    project the sources), 'dst2' (SAGE: two GEMMs on the destination rows), 'typed' (R-GCN:
    one transform per (relation, source) pair, at most one per edge, and the root's on the
    destinations)."""
    dims = [f_in, m.hidden * (m.heads if m.kind == "gat" else 1), classes]
    out = []
    for fin, fout in zip(dims[:-1], dims[1:]):
        if m.kind == "sage":  # projects first when narrower (mean is linear): see SAGEConv
            out.append((fin, fout, min(fin, fout), "dst2"))
        elif m.kind == "gcn":
            out.append((fin, fout, fout, "src"))
        elif m.kind == "rgcn":
            out.append((fin, fout, fout, "typed"))
        else:  # GAT: projection, then scores and a weighted sum over the edges
            out.append((fin, fout, 2 * fout, "src"))
    return out


def _projected_rows(m: ModelSpec, rows: str, n_src: float, n_dst: float, edges: float) -> float:
    if rows == "src":
        return n_src
    if rows == "dst2":
        return 2 * n_dst
    return min(edges, (m.relations or 1) * n_src) + n_dst


def _layers_time(m, widths, blocks, cal) -> tuple:
    """Compute seconds (forward + backward) of the layers over ``blocks`` [(src, dst, edges)]
    and the bytes of activations they keep for backward."""
    t, act = 0.0, 0
    for (fin, fout, agg, rows), (n_src, n_dst, edges) in zip(widths, blocks):
        t += (edges * agg / cal["aggregation_rate"]
              + _projected_rows(m, rows, n_src, n_dst, edges) * fin * fout / cal["gemm_rate"])
        act += (n_src * min(fin, fout) + 2 * n_dst * fout) * m.dtype_bytes
    return t, act


def _graph_time(m, widths, n_src: int, n_dst: int, edges: int, cal) -> tuple:
    """``_layers_time`` of every layer over one graph (a full graph or a part) of these sizes,
    GCN's self loops (one per destination) added to its edges."""
    return _layers_time(m, widths, [(n_src, n_dst, edges + (n_dst if m.kind == "gcn" else 0))] * len(widths), cal)


def _make_layers(m: ModelSpec, widths):
    convs = []
    for i, (fin, fout, _, _) in enumerate(widths):
        if m.kind == "sage":
            convs.append(ssnn.SAGEConv(fin, fout))
        elif m.kind == "gcn":
            convs.append(ssnn.GCNConv(fin, fout))
        elif m.kind == "rgcn":
            convs.append(ssnn.RGCNConv(fin, fout, m.relations or 1, aggr="add"))
        else:
            heads = m.heads if i + 1 < len(widths) else 1
            convs.append(ssnn.GATConv(fin, fout // heads, heads=heads))
    return torch.nn.ModuleList(convs)


def _train_step(convs, opt, graphs, x: torch.Tensor, y: torch.Tensor, dropout: float = 0.0,
                halos: Optional[list] = None) -> None:
    """One optimizer step of the layers as a training loop runs it: layer ``i`` on ``graphs[i]``
    (a block each, or one graph for all), ReLU and dropout between, cross-entropy, the loss read
    back. ``halos``: on a part of a full graph, the halo's rows each layer after the first
    takes beside the previous one's output, as the exchange brings them."""
    opt.zero_grad()
    h = x
    for i, (conv, graph) in enumerate(zip(convs, graphs)):
        h = conv(graph, h)
        if i + 1 < len(convs):
            h = torch.nn.functional.dropout(torch.relu(h), dropout, True)
            if halos is not None:
                h = torch.cat([h, halos[i]])
    loss = torch.nn.functional.cross_entropy(h, y)
    loss.backward()
    opt.step()
    loss.item()


def fit_step(m: ModelSpec, widths, cal) -> dict:
    """Times one optimizer step of the model's own layers on two random graphs and fits
    ``seconds = step_fixed_s + step_scale * (the rates' compute estimate)``: what the rates
    miss of a real step (activations, dropout, the loss, the optimizer, launch costs) as a fixed
    part and a factor. A few seconds; run once per plan unless the calibration holds the fit."""
    convs = _make_layers(m, widths)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    dtype = torch.float64 if m.dtype_bytes == 8 else torch.float32
    convs = convs.to(dtype)
    points = []
    for n, e in ((300, 1500), (3000, 30000)):
        g = torch.Generator().manual_seed(n)
        typed = {}
        if m.kind == "rgcn":
            r = m.relations or 1
            typed = dict(edge_type=torch.randint(0, r, (e,), generator=g), num_edge_types=r)
        graph = Graph.from_edge_index(torch.randint(0, n, (2, e), generator=g), num_nodes=n, **typed)
        x = torch.randn(n, widths[0][0], generator=g, dtype=dtype)
        y = torch.randint(0, widths[-1][1], (n,), generator=g)

        # a step as runs see it, as the benchmark measures epochs (median)
        t = _typical(lambda: _train_step(convs, opt, [graph] * len(convs), x, y, m.dropout))
        units, _ = _layers_time(m, widths, [(n, n, e + (n if m.kind == "gcn" else 0))] * len(widths), cal)
        points.append((units, t))
    (u0, t0), (u1, t1) = points
    scale = max((t1 - t0) / max(u1 - u0, 1e-12), 1e-3)
    return dict(step_fixed_s=max(t0 - scale * u0, 0.0), step_scale=scale)


# ``measure_minibatch_loop`` times at least this many steps, unless that takes longer than this
LOOP_STEPS, LOOP_SECONDS = 40, 2.0


def measure_minibatch_loop(m: ModelSpec, widths, graph, x, train, batch: int, batches: int = 8) -> dict:
    """The mini-batch training loop as one process runs it: a NeighborLoader over the data (its
    thread samples and gathers the next batch beside the step), the model's layers with its
    dropout, the loss, the optimizer, the loss read back. An epoch of ``batches`` batches of
    ``batch`` seeds, three times, and more while fewer than ``LOOP_STEPS`` steps were timed
    and ``LOOP_SECONDS`` have not passed (a small graph's few short steps vary most). Returns
    ``minibatch_step_s`` (the mean wall time from one batch to the next, after the first epoch
    and each epoch's first batch: the step with what
    the loader adds to it, stalls included), ``loader_batch_s`` (the loader's time for one
    batch on its own: what an epoch waits for before its first step) and ``process_cores`` (CPU seconds per
    second of the loop: the cores one process keeps busy). Random labels; the data's features
    (random ones of the model's width when it has none)."""
    dtype = torch.float64 if m.dtype_bytes == 8 else torch.float32
    convs = _make_layers(m, widths).to(dtype)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    seeds = train.nonzero().view(-1) if train is not None else torch.arange(graph.num_nodes)
    seeds = seeds[torch.randperm(seeds.numel(), generator=g)[:batch * batches]]
    if x is None:
        x = torch.randn(graph.num_nodes, widths[0][0], generator=g, dtype=dtype)
    y = torch.randint(0, widths[-1][1], (graph.num_nodes,), generator=g)
    steps, wall, cpu = [], 0.0, 0.0
    loader = NeighborLoader((graph, x, y), list(m.fanouts), batch_size=batch, input_nodes=seeds, prefetch=2)
    epoch, start = 0, time.perf_counter()
    while epoch < 3 or (len(steps) < LOOP_STEPS and time.perf_counter() - start < LOOP_SECONDS):
        t, w0, c0 = time.perf_counter(), time.perf_counter(), time.process_time()
        for i, b in enumerate(loader):
            _train_step(convs, opt, b.blocks, b.x.to(dtype), b.y, m.dropout)
            now = time.perf_counter()
            if epoch and i:
                steps.append(now - t)
            t = now
        if epoch:
            wall, cpu = wall + time.perf_counter() - w0, cpu + time.process_time() - c0
        epoch += 1
    alone = NeighborLoader((graph, x, y), list(m.fanouts), batch_size=batch, input_nodes=seeds, prefetch=0)
    it = iter(alone)
    loader_s = _typical(lambda: next(it), reps=min(5, len(alone) - 1)) if len(alone) > 1 else 0.0
    step = statistics.fmean(steps) if steps else wall / max(1, (epoch - 1) * len(loader))
    return dict(minibatch_step_s=step, loader_batch_s=loader_s, process_cores=cpu / wall if wall else 1.0)


def measure_fetch_work(graph, x, f_in: int, train, m: ModelSpec, k: int, batch: int, cache_rows: int,
                       batches: int = 4) -> float:
    """Seconds of a partitioned-features fetch's local work per batch on each of ``k`` ranks
    (not its exchanges): route the batch's input ids by owner, serve the rows others ask for,
    place the received ones, and look them up in a cache of the ``cache_rows`` highest
    out-degree remote vertices, merging hits and misses: the same steps the fetch runs, on
    batches sampled from the data with a random assignment to ``k`` parts. On one rank a
    fetch is a local gather, as with replicated features: 0."""
    if k < 2:
        return 0.0
    g = torch.Generator().manual_seed(3)
    n = graph.num_nodes
    assignment = torch.randint(0, k, (n,), generator=g)
    owned = (assignment == 0).nonzero().view(-1)
    if x is None:
        x = torch.randn(n, f_in, generator=g)
    rows = x.index_select(0, owned)
    # the cache rank 0 would hold: its highest out-degree remote vertices
    hot = hot_by_degree(graph, types.SimpleNamespace(assignment=assignment, rank=0), cache_rows)
    slots = torch.full((n,), -1, dtype=torch.long)
    slots[hot] = torch.arange(hot.numel())
    cache = x.index_select(0, hot)
    seeds = train.nonzero().view(-1) if train is not None else torch.arange(n)
    samples = []
    for i in range(batches):
        ids = sample_blocks(graph, seeds[torch.randperm(seeds.numel(), generator=g)[:batch]], list(m.fanouts),
                            seed=i).input_nodes
        # a rank serves about as many rows as it asks for: the misses, from ranks like itself
        asked = owned[torch.randint(0, owned.numel(), (ids.numel(),), generator=g)]
        samples.append((ids, asked))
    turn = itertools.cycle(samples)

    def fetch():
        ids, asked = next(turn)
        slot, hit = lookup(slots, ids)
        miss = ids[~hit]
        order, _, _ = route(miss, assignment, k)
        served = serve(asked[:miss.numel()], owned, rows, 0)
        merge(cache, slot, hit, place(served, order))

    return _typical(fetch, reps=2 * batches)


FULL_STEP_MAX_EDGES = 20_000_000  # above: the full-graph step is estimated from the fit, not timed


def measure_fullgraph_step(m: ModelSpec, widths, graph) -> Optional[float]:
    """Seconds of one optimizer step of the model's own layers over the data's whole graph
    (random features, the median of three after a warm one), or None for a graph of more than
    ``FULL_STEP_MAX_EDGES`` edges. A part's step is this scaled by the rates' estimate of the
    part over the whole: at this size memory traffic, not the rates of small graphs, sets it."""
    if graph.num_edges > FULL_STEP_MAX_EDGES:
        return None
    dtype = torch.float64 if m.dtype_bytes == 8 else torch.float32
    convs = _make_layers(m, widths).to(dtype)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(graph.num_nodes, widths[0][0], generator=g, dtype=dtype)
    y = torch.randint(0, widths[-1][1], (graph.num_nodes,), generator=g)
    return _typical(lambda: _train_step(convs, opt, [graph] * len(convs), x, y, m.dropout), reps=3)


# the part ``measure_scales`` steps over has at most this many edges: a step of a second or so
PART_MAX_EDGES = 4_000_000


def _part_of(graph: Graph, k: int) -> tuple:
    """(edge_index, edge_type or None, sources, destinations) of one part of ``graph`` as a
    random partition into ``k`` makes it and full-graph training runs it: the in-edges of a
    random ``1/k`` of the vertices (fewer where that is over ``PART_MAX_EDGES`` edges) on a
    bipartite graph whose destinations are those vertices and whose sources are they, then the
    halo (the other vertices their in-edges come from)."""
    ei = graph.edge_index
    share = min(1.0 / k, PART_MAX_EDGES / max(1, ei.shape[1]))
    owned = torch.rand(graph.num_nodes, generator=torch.Generator().manual_seed(5)) < share
    owned[0] = True  # a part owns a vertex, however small the share
    keep = owned[ei[1]]
    src, dst = ei[0, keep], ei[1, keep]
    local = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    n_own = int(owned.sum())
    local[owned] = torch.arange(n_own)
    halo = torch.unique(src[~owned[src]])
    local[halo] = n_own + torch.arange(halo.numel())
    types = graph.edge_type[keep] if graph.has_edge_types else None
    return torch.stack([local[src], local[dst]]), types, n_own + halo.numel(), n_own


def _as_graph(edge_index: torch.Tensor, types: Optional[torch.Tensor], num_nodes, num_edge_types) -> Graph:
    typed = dict(edge_type=types, num_edge_types=num_edge_types) if types is not None else {}
    return Graph.from_edge_index(edge_index, num_nodes=num_nodes, **typed)


def _alone_then_together(rank: int, measure) -> tuple:
    """``measure()`` in rank 0 while the others wait, then in every rank at once: (rank 0's
    time alone, the slowest rank's time together)."""
    dist.barrier()
    alone = measure() if rank == 0 else 0.0
    dist.barrier()
    together = torch.tensor([measure()], dtype=torch.float64)
    dist.all_reduce(together, op=dist.ReduceOp.MAX)
    return alone, float(together)


def _scales_rank(rank, world, m: ModelSpec, widths, graphs: str, batch: int, threads: int) -> None:
    """One rank of ``measure_scales``: a full-graph step on the part, then the mini-batch loop
    over the whole graph, each alone and together (``graphs``: the file that holds both)."""
    torch.set_num_threads(threads)  # as the training processes run
    saved = torch.load(graphs)
    dtype = torch.float64 if m.dtype_bytes == 8 else torch.float32
    ei, types, n_src, n_dst = saved["part"]
    part = _as_graph(ei, types, (n_src, n_dst), saved["num_edge_types"])
    convs = _make_layers(m, widths).to(dtype)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(n_src, widths[0][0], generator=g, dtype=dtype)
    halos = [torch.randn(n_src - n_dst, fin, generator=g, dtype=dtype) for fin, _, _, _ in widths[1:]]
    y = torch.randint(0, widths[-1][1], (n_dst,), generator=g)
    # small steps vary more from one to the next; a big part's step timed 3 times in 3
    # processes on 2 cores gave scales from 1.5 to 2.3 in two runs
    reps = 5 if ei.shape[1] >= 1_000_000 else 11
    full = _alone_then_together(rank, lambda: _typical(
        lambda: _train_step(convs, opt, [part] * len(convs), x, y, m.dropout, halos), reps))
    ei, types, n = saved["whole"]
    whole = _as_graph(ei, types, n, saved["num_edge_types"])
    loop = _alone_then_together(rank, lambda: measure_minibatch_loop(m, widths, whole, None, None, batch)
                                ["minibatch_step_s"])
    if rank == 0:
        torch.save(dict(full=full, loop=loop), graphs + ".times")


def measure_scales(m: ModelSpec, widths, graph: Graph, k: int, local: int, batch: int) -> Optional[dict]:
    """The model's full-graph step on one part of the graph (``_part_of``, its halo's rows
    appended after each layer) and its mini-batch loop over the graph
    (``measure_minibatch_loop``, ``batch`` seeds, random features), each timed in one process
    alone, then in ``local`` spawned processes together, with the caller's threads. Their
    ratios, ``fullgraph_scale`` and ``minibatch_scale``, are how much the model's work slows
    when ``local`` processes of a machine run it at once: a step of arithmetic loses the cores' share and no more, one of
    memory traffic loses more, and the data's structure (R-GCN's (relation, source) pairs,
    say) sets the balance. The calibration's loop, a small GraphSAGE beside a loader thread on
    a random graph, stands for neither. The part's step alone is a part's step as it is, halo
    included, which the rates' estimate scaled from the whole graph is not. None for one
    process per machine."""
    if local < 2:
        return None
    types = graph.edge_type if graph.has_edge_types else None
    part = _part_of(graph, k)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "graphs.pt")  # a file, not the pipe: /dev/shm may be small
        torch.save(dict(whole=(graph.edge_index, types, graph.num_nodes), part=part,
                        num_edge_types=graph.num_edge_types if types is not None else None), path)
        launch.spawn(_scales_rank, local, args=(m, widths, path, batch, torch.get_num_threads()), timeout_s=600)
        r = torch.load(path + ".times")
    (fa, ft), (la, lt) = r["full"], r["loop"]
    return dict(fullgraph_alone_s=fa, fullgraph_together_s=ft, fullgraph_scale=max(1.0, ft / fa),
                fullgraph_part=[part[2], part[3], int(part[0].shape[1])], minibatch_alone_s=la,
                minibatch_together_s=lt, minibatch_scale=max(1.0, lt / la))


def _allreduce(nbytes: float, k: int, cal) -> float:
    if k < 2:
        return 0.0
    return 2 * (k - 1) * cal["latency_s"] + 2 * (k - 1) / k * nbytes / cal["bandwidth"]


def _alltoall(nbytes: float, k: int, cal) -> float:
    return 0.0 if k < 2 else (k - 1) * cal["latency_s"] + nbytes / cal["bandwidth"]


def _num_params(m: ModelSpec, widths) -> int:
    per_layer = (m.relations or 1) + 1 if m.kind == "rgcn" else 2  # R-GCN: a matrix per relation and the root
    return sum(per_layer * fin * fout + fout for fin, fout, _, _ in widths)  # lin and root/attention, bias


def _sampled_blocks(graph, train, m: ModelSpec, batch: int, batches: int = 4) -> dict:
    """Mean sizes of a batch of ``batch`` seeds: per block (sources, destinations, edges) and
    its sampled edges, from ``batches`` batches sampled on the data."""
    seeds = train.nonzero().view(-1) if train is not None else torch.arange(graph.num_nodes)
    g = torch.Generator().manual_seed(0)
    sums, edges_total = None, 0
    for i in range(batches):
        s = seeds[torch.randperm(seeds.numel(), generator=g)[:batch]]
        b = sample_blocks(graph, s, list(m.fanouts), seed=i)
        sizes = [(blk.num_src, blk.num_dst, blk.num_edges) for blk in b.blocks]
        edges_total += sum(e for _, _, e in sizes)
        sums = sizes if sums is None else [tuple(a + c for a, c in zip(x, y)) for x, y in zip(sums, sizes)]
    blocks = [tuple(v / batches for v in s) for s in sums]
    return dict(blocks=blocks, input_rows=blocks[0][0], edges=edges_total / batches)


def _stretch(local: int, cal, busy: float) -> float:
    """How much compute slows when ``local`` processes of a machine, each keeping ``busy``
    cores busy, share its cores."""
    return max(1.0, local * busy / max(1, cal.get("cores", os.cpu_count() or 1)))


def _expected_halo(out_deg: torch.Tensor, k: int) -> float:
    if k < 2:
        return 0.0
    d = out_deg.to(torch.float64)
    return float(((k - 1) / k * (1 - (1 - 1 / k) ** d)).sum())


def _cache_hit_rate(out_deg: torch.Tensor, k: int, fraction: float) -> tuple:
    """(rows cached, expected hit rate) of a cache of the highest out-degree remote vertices:
    a random vertex is remote with probability (k-1)/k, so the remote vertices are a random
    sample of the rest and their out-degree distribution is the whole graph's."""
    if k < 2:
        return 0, 0.0
    d = torch.sort(out_deg.to(torch.float64), descending=True).values
    remote = d.numel() * (k - 1) / k
    rows = int(round(fraction * remote))
    if rows == 0 or float(d.sum()) == 0:
        return rows, 0.0
    # the top `rows` remote vertices hold the top `rows / remote` share of the out-degree mass
    top = int(round(rows / remote * d.numel()))
    return rows, float(d[:top].sum() / d.sum())


def plan(data, world_size: int, model_spec, memory_per_process: Optional[float] = None,
         calibration: Optional[dict] = None, partition_report: Optional[dict] = None,
         processes_per_machine: Optional[int] = None) -> Plan:
    """The cost model's plan (see the module doc). ``calibration``: the output of
    ``calibrate`` (measured now when None); ``partition_report``: ``read_report`` of a
    partition at ``world_size`` parts (its halo sizes then replace the estimate);
    ``processes_per_machine``: how many of the processes share a machine's cores (default:
    all of them, one machine)."""
    k = int(world_size)
    if k < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    local = k if processes_per_machine is None else int(processes_per_machine)
    if not 1 <= local <= k:
        raise ValueError(f"processes_per_machine must be in [1, world_size={k}], got {processes_per_machine}")
    if memory_per_process is not None and memory_per_process <= 0:
        raise ValueError(f"memory_per_process must be a positive number of MB, got {memory_per_process}")
    m = ModelSpec.of(model_spec)
    if calibration is None:
        calibration = calibrate(world_size=max(2, k))
    cal = dict(calibration)
    missing = [key for key in ("aggregation_rate", "gemm_rate", "sampling_rate", "gather_rate", "step_overhead_s",
                               "base_rss_mb", "latency_s", "bandwidth") if cal.get(key) is None]
    if missing and (k > 1 or set(missing) - {"latency_s", "bandwidth"}):
        raise ValueError(f"the calibration lacks {missing}: run seastar.distributed.calibrate() (with collectives "
                         f"for world_size > 1)")
    if partition_report is not None and len(partition_report.get("parts", [])) != k:
        raise ValueError(f"partition_report has {len(partition_report.get('parts', []))} parts, world_size is {k}")
    graph, ei, f_in, train_count, train, classes = _data_arrays(data)
    f_in, classes = m.in_features or f_in, m.classes or classes
    if m.kind == "rgcn" and m.relations is None:
        if not graph.has_edge_types:
            raise ValueError("model_spec kind 'rgcn' needs a graph with edge types, or model_spec relations")
        m = dataclasses.replace(m, relations=int(graph.num_edge_types))
    n, e = graph.num_nodes, int(ei.shape[1])
    out_deg = torch.bincount(ei[0], minlength=n)
    widths = _widths(m, f_in, classes)
    if "step_fixed_s" not in cal or "step_scale" not in cal:
        cal.update(fit_step(m, widths, cal))
    params = _num_params(m, widths)
    param_bytes = params * m.dtype_bytes
    base = cal["base_rss_mb"] * 2**20
    structure = e * 16 + (e + n) * 8 * 2  # edge list, and the C++ graph's CSC and CSR
    rows = []

    # mini-batch: steps per epoch and a batch's sizes at the batch each step really has
    per_rank = math.ceil(train_count / k)
    steps = math.ceil(per_rank / m.batch_size)
    batch = max(1, math.ceil(per_rank / steps))
    mb = _sampled_blocks(graph, train, m, batch)
    compute, act = _layers_time(m, widths, mb["blocks"], cal)
    grads = _allreduce(param_bytes, k, cal)
    in_bytes = mb["input_rows"] * f_in * m.dtype_bytes
    x = _features(data, m)
    if x is not None and x.shape[1] != f_in:  # in_features given: random rows of that width
        x = None
    cache_rows, hit = _cache_hit_rate(out_deg, k, m.cache_fraction)

    # the measured loop and fetch are inputs of the plan like the rates: written into its
    # calibration (a calibration that holds them, None included, is taken as it is: None
    # means the estimate from the rates and the fit)
    if "minibatch_step_s" not in cal:
        cal.update(measure_minibatch_loop(m, widths, graph, x, train, batch))
    if "fetch_work_s" not in cal:
        cal["fetch_work_s"] = measure_fetch_work(graph, x, f_in, train, m, k, batch, cache_rows)
    step_s, loader_s, busy = cal["minibatch_step_s"], cal.get("loader_batch_s"), cal.get("process_cores")
    if step_s is None or loader_s is None:  # the loader's rates, then the fit's step, in turn
        loader_s = mb["edges"] / cal["sampling_rate"] + in_bytes / cal["gather_rate"]
        step_s = cal["step_fixed_s"] + cal["step_scale"] * compute + loader_s
        busy = None
    # the processes of a machine share its cores (estimated: its threads and the loader's)
    stretch = _stretch(local, cal, busy or cal.get("threads", 1) + 1)
    if k > 1 and not {"minibatch_scale", "fullgraph_scale"} <= set(cal):
        cal.update(measure_scales(m, widths, graph, k, local, batch) or dict(minibatch_scale=None,
                                                                            fullgraph_scale=None))
    if k > 1 and (cal.get("minibatch_scale") or cal.get("loop_scale")):
        # measured: the model's loop in k processes against one alone (else the calibration
        # loop's), and the wait at each all-reduce of the calibration loop's fit
        stretch, stall = cal.get("minibatch_scale") or cal["loop_scale"], cal.get("loop_stall_s", 0.0)
        work = step_s * stretch + stall
    else:  # estimated: shared cores, then the wait for the slowest rank at each all-reduce
        work, stall = step_s * stretch * (1 + (cal.get("skew") or 0.0) * (k > 1)), 0.0

    # an epoch: its steps, each with its gradients' all-reduce, after the wait for its first batch
    rows.append(dict(candidate="mini-batch, replicated features", mode="minibatch", features="shared",
                     steps=steps, epoch_s=steps * (work + grads) + loader_s * stretch, comm_s=steps * grads,
                     comm_bytes=steps * (2 * (k - 1) / k * param_bytes if k > 1 else 0),
                     peak_mb=(base + structure + n * f_in * m.dtype_bytes + 3 * in_bytes + act + 4 * param_bytes)
                     / 2**20))

    remote_rows = mb["input_rows"] * (k - 1) / k
    miss_bytes = remote_rows * (1 - hit) * f_in * m.dtype_bytes
    exchange = 2 * _alltoall(0, k, cal) + _alltoall(miss_bytes, k, cal)  # counts, ids, then rows
    # its first exchange waits for the slowest rank as the gradients' all-reduce does: a stall
    fetch_s = (cal["fetch_work_s"] or 0.0) * stretch + exchange + stall
    # one fetch a batch: the first before the epoch's first step, each later one in turn with
    # the step before it, so ``steps`` of them in all
    rows.append(dict(candidate=f"mini-batch, partitioned features + cache ({m.cache_fraction:.0%} of remote rows, "
                               f"expected hit rate {hit:.0%})", mode="minibatch", features="partitioned",
                     cache_fraction=m.cache_fraction, expected_hit_rate=hit, steps=steps,
                     epoch_s=steps * (work + grads + fetch_s) + loader_s * stretch,
                     comm_s=steps * (grads + exchange),
                     comm_bytes=steps * (miss_bytes + (2 * (k - 1) / k * param_bytes if k > 1 else 0)),
                     peak_mb=(base + structure + (math.ceil(n / k) + cache_rows) * f_in * m.dtype_bytes + 3 * in_bytes
                              + act + 4 * param_bytes) / 2**20))

    # full graph: the largest part
    if partition_report is not None:
        halo = max(p["halo"] for p in partition_report["parts"])
        part_edges = max(p["in_edges"] for p in partition_report["parts"])
        owned = max(p["owned"] for p in partition_report["parts"])
        halo_note = "halo of the given partition"
    else:
        halo, part_edges, owned = _expected_halo(out_deg, k), e / k, n / k
        halo_note = "halo expected of a random partition"
    fcompute, fact = _graph_time(m, widths, owned + halo, owned, part_edges, cal)
    if k > 1 and cal.get("fullgraph_alone_s") and cal.get("fullgraph_part"):
        # a part's step measured (``measure_scales``): scaled by the rates' estimate from the
        # part timed to this one (a given partition's, say); the whole graph's step is not
        # timed, as nothing would read it
        timed, _ = _graph_time(m, widths, *cal["fullgraph_part"], cal)
        fstep = cal["fullgraph_alone_s"] * fcompute / timed
    else:
        if "fullgraph_step_s" not in cal:
            cal["fullgraph_step_s"] = measure_fullgraph_step(m, widths, graph)
        whole_s = cal["fullgraph_step_s"]
        if whole_s is None:
            fstep = cal["step_fixed_s"] + cal["step_scale"] * fcompute
        else:
            whole, _ = _graph_time(m, widths, n, n, e, cal)
            fstep = whole_s * fcompute / whole
    exchange = sum(2 * _alltoall(halo * fin * m.dtype_bytes, k, cal) for fin, _, _, _ in widths[1:])
    fgrads = _allreduce(param_bytes, k, cal)
    syncs = 1 + 2 * (len(widths) - 1)  # the gradients' all-reduce; per later layer, a halo exchange each way
    if k > 1 and (cal.get("fullgraph_scale") or cal.get("loop_scale")):
        # measured, as for the mini-batch step; the calibration loop's stall is the wait at one
        # collective after compute, paid at each of the step's
        fslow = cal.get("fullgraph_scale") or cal["loop_scale"]
        fstall = syncs * cal.get("loop_stall_s", 0.0)
    else:
        fslow, fstall = _stretch(local, cal, cal.get("threads", 1)) * (1 + (cal.get("skew") or 0.0) * (k > 1)), 0.0
    rows.append(dict(candidate=f"full-graph, {k} part{'s' if k > 1 else ''} ({halo_note}: {halo:.0f} rows)",
                     mode="fullgraph", features="partitioned", steps=1,
                     epoch_s=fstep * fslow + fstall + exchange + fgrads,
                     comm_s=exchange + fgrads,
                     comm_bytes=sum(2 * halo * fin * m.dtype_bytes for fin, _, _, _ in widths[1:])
                     + (2 * (k - 1) / k * param_bytes if k > 1 else 0),
                     peak_mb=(base + structure / k + (owned + halo) * f_in * m.dtype_bytes + fact
                              + 4 * param_bytes) / 2**20))

    fits = [r for r in rows if memory_per_process is None or r["peak_mb"] <= memory_per_process]
    choice = min(fits, key=lambda r: r["epoch_s"]) if fits else min(rows, key=lambda r: r["peak_mb"])
    for r in rows:
        if memory_per_process is not None and r["peak_mb"] > memory_per_process:
            r["reason"] = f"does not fit: {r['peak_mb']:.0f} MB > {memory_per_process:.0f} MB per process"
            if not fits and r is choice:
                r["reason"] += "; nothing fits, this needs the least"
        elif r is choice:
            r["reason"] = "fastest predicted epoch" + (" that fits" if memory_per_process is not None else "")
        else:
            r["reason"] = f"{r['epoch_s'] / choice['epoch_s']:.2f}x the chosen epoch time"
    inputs = dict(num_nodes=n, num_edges=e, in_features=f_in, classes=classes, train_count=train_count,
                  parameters=params, model=dataclasses.asdict(m), batch=mb, memory_per_process=memory_per_process,
                  halo_rows=halo, compute_stretch=stretch, process_cores=busy,
                  processes_per_machine=local)
    return Plan(world_size=k, rows=rows, choice=choice, calibration=cal, inputs=inputs)
