"""A short measurement of this machine for the planner's cost model (``seastar.distributed.plan``).

    cal = calibrate()            # a few seconds; inside a process group also times its collectives

What it measures, each as a rate the model multiplies by a count:

* ``aggregation_rate``: edge x feature products per second of an in-edge aggregation, forward
  and backward together (a weighted sum, the propagation of GCN, on a random graph);
* ``gemm_rate``: multiply-adds per second of a dense ``[rows, F] @ [F, F']``, forward and
  backward (three products) counted as three;
* ``sampling_rate``: sampled edges per second of the C++ neighbour sampler;
* ``gather_rate``: bytes per second of gathering feature rows by index;
* ``latency_s`` and ``bandwidth``: of an all-reduce in the backend in use, fitted to
  ``t(bytes) = 2 (k-1) latency + 2 (k-1)/k bytes / bandwidth`` from a small and a large message
  (ring all-reduce). In a process group of ``k > 1`` ranks this is a collective: every rank
  calls ``calibrate``. Outside one, ``world_size`` fresh processes are spawned on localhost
  (``spawn_collectives=True``), or the collective fields stay None.
* ``threads``: torch's thread count while measuring (the rates hold for it);
* ``loop_scale`` and ``loop_stall_s``: what a step of a training loop costs in each of ``k``
  processes training at once (an all-reduce of the gradients per step) against one process
  alone, as ``together = loop_scale x alone + loop_stall_s``: the loop (``_loop_step``: a
  loader thread sampling and gathering beside GraphSAGE steps on a random graph, whole epochs
  timed) at two batch sizes, alone in the calling process (with ``compute_rates``: inside a
  job every rank times it at once, which makes the fit milder), then in every process of the
  group at once (the slowest rank's). It holds what the cores being shared, the ranks'
  arrival apart at each all-reduce and the scheduler's wake-ups of waiting threads cost, none
  of which the collectives' latency and bandwidth show.

Each rate is the best of a few repetitions (the machine's capability, not its noisiest moment).
"""
from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from typing import Optional

import torch
import torch.distributed as dist

from . import launch
from ..graph import Graph
from ..loader import NeighborLoader, sample_blocks
from ..nn import SAGEConv
from ..nn._programs import weighted_sum

log = logging.getLogger("seastar.distributed")


def _best(fn, reps: int = 3) -> float:
    fn()  # warm: compile, allocate
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _typical(fn, reps: int = 9) -> float:
    """The median of ``reps`` timed runs after a warm one: what a step takes in a run, where other
    work on the machine comes and goes (``_best`` is the machine's rate, undisturbed)."""
    fn()  # warm: compile, allocate
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _graph(n: int, e: int):
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, n, (2, e), generator=g)
    return Graph.from_edge_index(ei, num_nodes=n)


def compute_rates(num_nodes: int = 20_000, num_edges: int = 200_000, width: int = 32) -> dict:
    """The aggregation, GEMM, sampling and gather rates (see the module doc)."""
    graph = _graph(num_nodes, num_edges)
    h = torch.randn(num_nodes, width, requires_grad=True)
    w = torch.rand(num_edges, 1)

    def aggregate():
        weighted_sum(graph, h=h, w=w).sum().backward()

    t_agg = _best(aggregate)
    a, b = torch.randn(num_nodes, 256, requires_grad=True), torch.randn(256, 64, requires_grad=True)

    def gemm():
        (a @ b).sum().backward()

    t_gemm = _best(gemm)
    seeds = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(1))[:2048]
    sampled = sample_blocks(graph, seeds, [10, 5], seed=3)
    edges = sum(blk.num_edges for blk in sampled.blocks)
    t_sample = _best(lambda: sample_blocks(graph, seeds, [10, 5], seed=3))
    x = torch.randn(num_nodes, 128)
    idx = torch.randint(0, num_nodes, (num_nodes,), generator=torch.Generator().manual_seed(2))
    t_gather = _best(lambda: x.index_select(0, idx))
    return dict(aggregation_rate=num_edges * width / t_agg, gemm_rate=3 * num_nodes * 256 * 64 / t_gemm,
                sampling_rate=edges / t_sample, gather_rate=num_nodes * 128 * 4 / t_gather,
                step_overhead_s=_step_overhead(), base_rss_mb=_rss_mb(), threads=torch.get_num_threads(),
                cores=_cores(), loop_alone_s=loop_alone())


def _step_overhead() -> float:
    """One optimizer step of a two-layer model on a 64-vertex graph: the fixed cost of a step
    (Python, autograd, kernel launches, the optimizer), whatever the graph's size."""
    graph = _graph(64, 256)
    convs = torch.nn.ModuleList([SAGEConv(8, 8), SAGEConv(8, 4)])
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    x = torch.randn(64, 8)

    def step():
        opt.zero_grad()
        h = x
        for conv in convs:
            h = conv(graph, h)
        h.sum().backward()
        opt.step()

    return _best(step, reps=5)


def _rss_mb() -> float:
    """This process's resident memory now: torch and seastar loaded, no data yet."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def collective_rates(group=None, small: int = 1, large: int = 1 << 20) -> dict:
    """Latency and bandwidth of an all-reduce in ``group`` (a collective), fitted to the ring
    model from a message of ``small`` and one of ``large`` float32 values."""
    k = dist.get_world_size(group)
    if k < 2:
        return dict(latency_s=0.0, bandwidth=float("inf"), sync_s=0.0, skew=0.0, loop_together_s=None,
                    backend=dist.get_backend(group), world_size=k)
    times = []
    for n in (small, large):
        t = torch.ones(n)
        dist.all_reduce(t, group=group)  # warm: connections, buffers
        best = float("inf")
        for _ in range(5):
            dist.barrier(group=group)
            t0 = time.perf_counter()
            dist.all_reduce(t, group=group)
            best = min(best, time.perf_counter() - t0)
        # every rank takes the slowest rank's time: the collective ends when the last one does
        m = torch.tensor([best], dtype=torch.float64)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
        times.append(float(m))
    latency = times[0] / (2 * (k - 1))
    bytes_large = large * 4
    transfer = max(times[1] - times[0], 1e-9)
    return dict(latency_s=latency, bandwidth=2 * (k - 1) / k * bytes_large / transfer,
                **_skew(group), loop_together_s=loop_together(group), backend=dist.get_backend(group),
                world_size=k)


def _skew(group, reps: int = 10) -> dict:
    """How long a small all-reduce that follows compute waits, relative to that compute: ranks
    that share cores, or a machine that other work loads, arrive apart, and the wait grows with
    the work before it. ``skew`` = mean wait / mean compute before it (the largest rank's);
    training pays about ``skew`` times its compute between collectives."""
    a0 = torch.randn(256, 256)
    t = torch.ones(1)
    waits, work = [], []
    for _ in range(reps):
        a = a0
        c0 = time.perf_counter()
        for _ in range(8):  # a few ms of work, as between a step's collectives
            a = torch.tanh(a @ a) * 0.5
        t0 = time.perf_counter()
        dist.all_reduce(t, group=group)
        waits.append(time.perf_counter() - t0)
        work.append(t0 - c0)
    m = torch.tensor([sum(waits) / len(waits), sum(work) / len(work)], dtype=torch.float64)
    dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
    return dict(sync_s=float(m[0]), skew=float(m[0] / m[1]))


class _TwoLayers(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.convs = torch.nn.ModuleList([SAGEConv(width, width), SAGEConv(width, 8)])

    def forward(self, blocks, x):
        h = torch.nn.functional.dropout(torch.relu(self.convs[0](blocks[0], x)), 0.5, self.training)
        return self.convs[1](blocks[1], h)


# seeds per batch of the two loops the k-process fit is made from: steps of about a millisecond
# and of tens of them, so that the line spans the steps of small and of large graphs rather
# than being carried out from small ones (where the wait at each all-reduce is most of a step)
LOOP_BATCHES = (64, 2048)


def _loop_model(width: int, together: bool, group=None) -> torch.nn.Module:
    """The loop's two layers; ``together``: wrapped in DDP as the example wraps its model (its
    hooks, graph walk and gradient all-reduce are per-step costs)."""
    convs = _TwoLayers(width)
    if not together:
        return convs
    ddp = torch.nn.parallel.DistributedDataParallel(convs, process_group=group)
    ddp.reducer._push_all_rebuilt_params()  # the example's fixed bucket layout (examples/distributed/train.py)
    return ddp


def _loop_step(batch: int, together: bool = False, group=None, batches: int = 6, epochs: int = 6) -> float:
    """Seconds per batch of a small mini-batch training loop, whole epochs timed (the first
    batch's wait and every stall included): a NeighborLoader (prefetching on its thread) over a
    random graph, two GraphSAGE layers with dropout, cross-entropy, Adam; ``together``: in every
    process of ``group`` (None: the default group), wrapped in DistributedDataParallel, with an
    all-reduce of the epoch's loss totals at its end (as examples/distributed/train.py runs
    it). The first epoch warms."""
    g = torch.Generator().manual_seed(4)
    n, width = 20_000, 32
    graph = _graph(n, 200_000)
    x, y = torch.randn(n, width, generator=g), torch.randint(0, 8, (n,), generator=g)
    model = _loop_model(width, together, group)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    seeds = torch.randperm(n, generator=g)[:batch * batches]
    loader = NeighborLoader((graph, x, y), [10, 5], batch_size=batch, input_nodes=seeds, prefetch=2)
    total = 0.0
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for b in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(b.blocks, b.x), b.y)
            loss.backward()
            opt.step()
            loss.item()
        if epoch:
            total += time.perf_counter() - t0
        if together:
            dist.all_reduce(torch.ones(2, dtype=torch.float64), group=group)
    return total / ((epochs - 1) * len(loader))


def loop_alone() -> list:
    """The loop of ``_loop_step`` in this process alone, at each of ``LOOP_BATCHES``."""
    return [_loop_step(b) for b in LOOP_BATCHES]


def loop_together(group=None) -> list:
    """The same loops in every process of ``group`` at once (a collective): the slowest rank's."""
    together = torch.tensor([_loop_step(b, True, group) for b in LOOP_BATCHES], dtype=torch.float64)
    dist.all_reduce(together, op=dist.ReduceOp.MAX, group=group)
    return together.tolist()


def loop_fit(alone: list, together: list) -> dict:
    """``together = loop_scale x alone + loop_stall_s`` through the two batch sizes' points."""
    (a0, a1), (t0, t1) = alone, together
    scale = max(1.0, (t1 - t0) / max(a1 - a0, 1e-9))
    return dict(loop_together_s=[t0, t1], loop_scale=scale, loop_stall_s=max(0.0, t0 - scale * a0))


def _collectives_rank(rank, world, out, threads):
    # the ranks run with the caller's threads, as the training processes it plans for do (a
    # fresh process would take torch's default, every core, and the ranks would then contend)
    torch.set_num_threads(threads)
    rates = dict(collective_rates(), rank_threads=torch.get_num_threads())
    if rank == 0:
        torch.save(rates, f"{out}/cal.pt")


def calibrate(spawn_collectives: bool = True, world_size: int = 2, group=None) -> dict:
    """Every rate of the module doc. Inside a process group: its collectives too (every rank
    must call this). Outside: ``world_size`` processes spawned on localhost with gloo, when
    ``spawn_collectives``."""
    t0 = time.perf_counter()
    cal = compute_rates()
    if dist.is_initialized():
        cal.update(collective_rates(group))
    elif spawn_collectives:
        with tempfile.TemporaryDirectory() as d:
            launch.spawn(_collectives_rank, world_size, args=(d, torch.get_num_threads()), timeout_s=120)
            cal.update(torch.load(os.path.join(d, "cal.pt")))
    else:
        cal.update(latency_s=None, bandwidth=None, sync_s=None, skew=None, loop_together_s=None, backend=None,
                   world_size=None)
    if cal.get("loop_together_s"):
        cal.update(loop_fit(cal["loop_alone_s"], cal["loop_together_s"]))
    cal["calibration_s"] = time.perf_counter() - t0
    log.info("calibration: aggregation %.3g edge-features/s, GEMM %.3g multiply-adds/s, sampling %.3g edges/s, "
             "all-reduce latency %s, bandwidth %s", cal["aggregation_rate"], cal["gemm_rate"], cal["sampling_rate"],
             _fmt(cal["latency_s"], "s"), _fmt(cal["bandwidth"], "B/s"))
    return cal


def _fmt(v: Optional[float], unit: str) -> str:
    return "not measured" if v is None else f"{v:.3g} {unit}"
