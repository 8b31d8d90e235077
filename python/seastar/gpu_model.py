"""Models of the generated CUDA kernels that need no GPU: load imbalance, bytes moved, registers.

Everything here reads what the code generator itself decided, through the bindings: a fused
program's launches (``FusedProgram.cuda_launches``: each kernel's thread mapping from
``codegen/launch_layout.h``, what it iterates, and its static traffic from ``codegen/traffic.h``),
the grid the runtime would launch (``FusedProgram.cuda_grid``) and ptxas's report through NVRTC
(``_C.nvrtc_compile``). No constant of the launch mapping is copied here; the device's limits
(``Device``) are the only numbers this module supplies.

* **Load imbalance** (``load_imbalance``): a traversal's groups take centre vertices from a
  global counter in degree order (hubs first): a warp takes ``32 / group_threads`` consecutive
  centres at a time (its groups run in lockstep, so the warp is busy until its longest centre is
  done), a block of ``group_threads > 32`` takes one centre. The workers (the warps, or the
  blocks) that fit on the device at once run until the counter is exhausted; list scheduling of
  those tasks in that order gives each worker's work. A centre costs its degree times the
  kernel's passes that read anything per edge, plus one for the centre. A traversal with a hub
  path (``hub_degree``) first gives each centre of at least that degree to a whole block, whose
  groups split its edges and combine after each pass (one more step per pass); its warps then
  take the rest. A traversal with parameter-gradient partial sums (``items`` chunks: chunk b
  adds up items b, b + NB, ... in a fixed order) with a hub path instead cuts each hub into pieces
  of a fraction of the mean chunk's edges (``FusedProgram.cuda_hub_piece_edges``), items of the
  chunks like the centres after them; or, when it also has accumulators, gives its hubs to at
  most ``hub_workers`` workers, a block each (worker w the hubs w, w + HW, ...; the blocks take
  workers from a counter, their groups split each hub as above), before its chunks take the
  other centres. Reported: the busiest block's
  work over the mean block's (the kernel's time over the time a perfect split would take, when
  the work is memory-bound and every block moves bytes at the same rate), the same for the
  workers, and the largest single task over the mean worker's work (a bound no dynamic
  schedule can beat: one centre's edges are walked by one group). Map kernels assign items
  round-robin over a grid-stride loop.
* **Traffic** (``traffic_summary``): bytes per edge, per vertex and per launch of a kernel, and
  the bytes one call moves on a graph (``kernel_bytes``).
* **Registers** (``registers``): registers, stack and spills per kernel for an architecture.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np

from . import _C
from .program import capture_signatures

WARP = 32  # the CUDA warp (launch::kWarpSize); a hardware constant, not a mapping choice


@dataclass(frozen=True)
class Device:
    """The limits occupancy depends on, per streaming multiprocessor."""
    name: str
    sms: int
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    shared_bytes_per_sm: int = 228 * 1024
    register_unit: int = 256  # registers are allocated per warp in units of this many

    def resident_blocks(self, block_threads: int, registers: Optional[int] = None, shared_bytes: int = 0) -> int:
        """Blocks of a kernel resident on the whole device (what cuOccupancyMaxActiveBlocksPerMultiprocessor
        times the SM count gives, up to allocation details); ``registers`` None: not limiting."""
        if block_threads < 1:
            raise ValueError(f"block_threads must be >= 1, got {block_threads}")
        per_sm = min(self.max_blocks_per_sm, self.max_threads_per_sm // block_threads)
        warps = math.ceil(block_threads / WARP)
        if registers:
            per_warp = math.ceil(registers * WARP / self.register_unit) * self.register_unit
            per_sm = min(per_sm, (self.registers_per_sm // per_warp) // warps)
        if shared_bytes:
            per_sm = min(per_sm, self.shared_bytes_per_sm // shared_bytes)
        return max(per_sm, 1) * self.sms


H200 = Device("NVIDIA H200 (sm_90, 132 SMs)", sms=132)


# -- programs and kernels ------------------------------------------------------------------------
def record_programs():
    """Context manager: the fused programs run inside it, in call order, one entry per
    (program, signature) as ``(name, compiled)`` in ``.programs``; ``compiled.kernels`` is the
    FusedProgram; ``.calls[id(compiled)]`` the graph and tensors of its first call."""
    return capture_signatures(run_fused=True)


def directions(compiled) -> List[str]:
    """``forward``, and ``backward`` when the program has gradients."""
    return ["forward", "backward"] if compiled.lowered.wrt else ["forward"]


def launches(compiled, direction: str, dtype=None, index_dtype: str = "int32") -> List[dict]:
    """The CUDA launches of one direction, in launch order (``FusedProgram.cuda_launches``)."""
    import torch
    return compiled.kernels.cuda_launches(direction, dtype or torch.float32, index_dtype)


# -- traffic ---------------------------------------------------------------------------------------
def traffic_summary(launch: dict) -> dict:
    """Bytes per edge, per vertex (per centre of a traversal) and per launch of one kernel:
    read, written, and of the reads those gathered (at the neighbour, through an edge id)."""
    out = {f"{per}_{kind}": 0 for per in ("edge", "vertex", "launch") for kind in ("read", "write", "gathered")}
    for t in launch["traffic"]:
        out[f"{t['per']}_{'write' if t['write'] else 'read'}"] += t["bytes"]
        if t["gathered"] and not t["write"]:
            out[f"{t['per']}_gathered"] += t["bytes"]
    out["bytes_per_edge"] = out["edge_read"] + out["edge_write"]
    out["bytes_per_vertex"] = out["vertex_read"] + out["vertex_write"]
    out["bytes_per_launch"] = out["launch_read"] + out["launch_write"]
    out["passes"] = 1 + max((t["pass"] for t in launch["traffic"]), default=0)
    # passes whose edge loop moves anything (an empty loop is compiled away)
    out["edge_passes"] = len({t["pass"] for t in launch["traffic"] if t["per"] == "edge"})
    return out


def kernel_bytes(launch: dict, num_nodes: int, num_edges: int) -> int:
    """Bytes one call of the kernel moves on a square graph under the traffic model: per edge
    times E, per vertex times the vertices it iterates (all of them for traversals and maps),
    plus per launch."""
    s = traffic_summary(launch)
    vertices = num_nodes if launch["items"] in ("vertices", "chunks") else 0
    return s["bytes_per_edge"] * num_edges + s["bytes_per_vertex"] * vertices + s["bytes_per_launch"]


def is_aggregation(launch: dict) -> bool:
    """Whether a launch walks edges (a traversal or a per-edge map): the kernels whose bytes
    per second a benchmark compares with the device's copy bandwidth."""
    return launch["what"].startswith("traversal") or launch["items"] == "edges"


# -- load imbalance --------------------------------------------------------------------------------
def degrees(edge_index, num_nodes: int):
    """(in-degrees, out-degrees) as int64 numpy arrays; ``edge_index`` [2, E], row 0 = source."""
    ei = np.asarray(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(ei.shape)}")
    if num_nodes < 0 or (ei.size and (ei.min() < 0 or ei.max() >= num_nodes)):
        raise ValueError(f"edge_index holds vertex ids outside 0..{num_nodes - 1}")
    return (np.bincount(ei[1], minlength=num_nodes).astype(np.int64),
            np.bincount(ei[0], minlength=num_nodes).astype(np.int64))


def schedule(task_costs: Sequence[float], workers: int, start: Optional[Sequence[float]] = None) -> np.ndarray:
    """Each worker's total work when ``workers`` workers take the tasks in order, each the next
    task as soon as it is free (a global counter); ties go to the lowest worker. ``start``: the
    work each worker has already done when it first takes a task (default none)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    costs = np.asarray(task_costs, dtype=np.float64)
    work = np.zeros(workers) if start is None else np.array(start, dtype=np.float64)
    if len(work) != workers:
        raise ValueError(f"start must have one entry per worker ({workers}), got {len(work)}")
    heap = [(w, i) for i, w in enumerate(work)]
    heapq.heapify(heap)
    for c in costs.tolist():
        w, i = heap[0]
        heapq.heapreplace(heap, (w + c, i))
    for w, i in heap:
        work[i] = w
    return work


def _lockstep_max(costs: np.ndarray, per: int) -> np.ndarray:
    """The cost of each run of ``per`` consecutive items done in lockstep (their maximum)."""
    if per <= 1:
        return costs
    pad = (-len(costs)) % per
    c = np.concatenate([costs, np.zeros(pad)]) if pad else costs
    return c.reshape(-1, per).max(axis=1)


def _hub_piece_costs(ordered: np.ndarray, hub: int, piece_edges: int, passes: int) -> np.ndarray:
    """The work items of a traversal that cuts hubs into pieces, in order, and their costs: each
    centre of at least ``hub`` edges (``ordered``: the degree order) as many items as the largest
    hub has pieces of ``piece_edges`` edges (a smaller hub's surplus ones empty, skipped at no
    cost); each a piece's edges times the passes plus one (the first piece also the centre's own
    work); then every other centre, its degree times the passes plus one."""
    nh = int(np.searchsorted(-ordered, -hub, side="right"))
    if nh == 0:
        return ordered * passes + 1.0
    pieces = int(math.ceil(ordered[0] / piece_edges))
    start = np.arange(pieces, dtype=np.float64) * piece_edges
    edges = np.clip(ordered[:nh, None] - start[None, :], 0, piece_edges)
    hub_cost = edges * passes + (edges > 0)
    hub_cost[:, 0] = edges[:, 0] * passes + 1.0
    return np.concatenate([hub_cost.ravel(), ordered[nh:] * passes + 1.0])


def load_imbalance(launch: dict, in_degree, out_degree, device: Device = H200,
                   registers: Optional[int] = None) -> dict:
    """The busiest block's work over the mean for one launch on a graph with these degrees
    (see the module's docstring); ``registers`` (from ``registers``) bounds the resident blocks."""
    in_degree, out_degree = np.asarray(in_degree, np.int64), np.asarray(out_degree, np.int64)
    N, E = len(in_degree), int(in_degree.sum())
    if len(out_degree) != N or int(out_degree.sum()) != E:
        raise ValueError("in_degree and out_degree must describe the same graph (lengths and sums differ)")
    gt, bt = launch["group_threads"], launch["block_threads"]
    cap = device.resident_blocks(bt, registers, launch.get("shared_bytes", 0))
    blocks = _C.FusedProgram.cuda_grid(launch, N, E, cap)
    traversal = launch["what"].startswith("traversal")
    res = dict(kernel=launch["name"], what=launch["what"], items=launch["items"], group_threads=gt,
               block_threads=bt, blocks=blocks, resident_blocks=cap)
    if traversal:
        deg = out_degree if "out-edges" in launch["what"] else in_degree
        passes = traffic_summary(launch)["edge_passes"]
        ordered = np.sort(deg)[::-1].astype(np.float64)  # the degree order, hubs first
        workers_per_block = bt // WARP if gt <= WARP else 1
        workers = blocks * workers_per_block
        start = np.zeros(workers)
        hub_tasks = np.zeros(0)
        hubs = 0
        hub = launch.get("hub_degree", 0)
        workers_mode = launch["items"] == "chunks" and launch.get("hub_workers", 0) > 0
        if hub > 0 and (launch["items"] == "vertices" or workers_mode):
            # hubs first, a block each: its groups walk equal slices (in lockstep per warp) and
            # combine after each pass; every warp of the block is busy for the slowest slice.
            # With hub workers (partial sums and accumulators) at most hub_workers blocks take
            # them, worker w the hubs w, w + HW, ...; then the chunks take the other centres
            hubs = int(np.searchsorted(-ordered, -hub, side="right"))
            hub_tasks = np.ceil(ordered[:hubs] / launch["groups_per_block"]) * passes + 1.0 + passes
            if workers_mode and hubs:
                hw = min(hubs, launch["hub_workers"])
                hub_tasks = np.bincount(np.arange(hubs) % hw, weights=hub_tasks, minlength=hw)
            start = np.repeat(schedule(hub_tasks, blocks), workers_per_block)
            ordered = ordered[hubs:]
            hub = 0  # the other centres are whole
        cost = ordered * passes + 1.0
        if launch["items"] == "chunks":  # fixed blocks of items: chunk b holds b, b + NB, ...
            nb = max(1, min(N, launch["count"]))
            if hub > 0:
                cost = _hub_piece_costs(ordered, hub, _C.FusedProgram.cuda_hub_piece_edges(launch, N, E), passes)
            cost = np.bincount(np.arange(len(cost)) % nb, weights=cost, minlength=nb)
        per_take = WARP // gt if gt <= WARP else 1  # items a worker takes from the counter at once
        tasks = _lockstep_max(cost, per_take)
        work = schedule(tasks, workers, start)
        block_work = work.reshape(blocks, workers_per_block).sum(axis=1)
        all_tasks = np.concatenate([hub_tasks, tasks])
        res.update(worker="warp" if gt <= WARP else "block", workers=workers, passes=passes, hubs=hubs,
                   largest_task=float(all_tasks.max(initial=0.0)),
                   mean_task=float(all_tasks.mean()) if len(all_tasks) else 0.0)
    else:
        items = {"vertices": N, "edges": E}.get(launch["items"], launch["count"])
        groups = blocks * launch["groups_per_block"]
        per_group = np.full(groups, items // groups, np.float64)
        per_group[: items % groups] += 1  # a grid-stride loop: item i to group i mod groups
        block_work = per_group.reshape(blocks, launch["groups_per_block"]).sum(axis=1)
        work = block_work
        res.update(worker="block", workers=blocks, passes=0, largest_task=1.0, mean_task=1.0)
    mean_block, mean_worker = float(block_work.mean()), float(work.mean())
    res.update(busiest_block_over_mean=float(block_work.max()) / mean_block if mean_block > 0 else 1.0,
               busiest_worker_over_mean=float(work.max()) / mean_worker if mean_worker > 0 else 1.0,
               largest_task_over_mean_worker=res["largest_task"] / mean_worker if mean_worker > 0 else 1.0,
               total_work=float(work.sum()))
    return res


# -- registers -------------------------------------------------------------------------------------
def nvrtc_status() -> tuple:
    """(True, "") when NVRTC can compile here, else (False, why)."""
    if not getattr(_C, "cuda_built", False):
        return False, "seastar was built without the CUDA backend"
    return tuple(_C.nvrtc_available())


def registers(compiled, direction: str, arch: int = 90, dtype=None, index_dtype: str = "int32",
              name: str = "model") -> Dict[str, dict]:
    """ptxas's report for every kernel of one direction, compiled by NVRTC for ``arch``:
    kernel name -> registers, stack_bytes, spill_store_bytes, spill_load_bytes, target."""
    import torch
    src = compiled.kernels.cuda_source(direction, dtype or torch.float32, index_dtype)
    r = _C.nvrtc_compile(src, arch, f"{name}_{direction}")
    return {k["name"]: dict(k, target=r["target"]) for k in r["kernels"]}


def model_rows(programs: Iterable[tuple], in_degree, out_degree, arch: Optional[int] = 90,
               device: Device = H200, label: str = "", on_kernel: Optional[Callable[[dict], None]] = None) -> List[dict]:
    """One row per kernel of every (name, compiled) program: its mapping, traffic, registers
    (when ``arch`` is given and NVRTC is available) and load imbalance on the degrees."""
    rows = []
    N, E = len(in_degree), int(np.asarray(in_degree).sum())
    have_nvrtc = arch is not None and nvrtc_status()[0]
    for name, compiled in programs:
        for direction in directions(compiled):
            regs = registers(compiled, direction, arch, name=name) if have_nvrtc else {}
            for l in launches(compiled, direction):
                r = regs.get(l["name"], {})
                row = dict(model=label, program=name, direction=direction, kernel=l["name"], what=l["what"],
                           items=l["items"], group_threads=l["group_threads"], block_threads=l["block_threads"],
                           features=l["features"], elems_per_thread=l["elems_per_thread"],
                           registers=r.get("registers"), stack_bytes=r.get("stack_bytes"),
                           spill_store_bytes=r.get("spill_store_bytes"), spill_load_bytes=r.get("spill_load_bytes"),
                           target=r.get("target"))
                row.update(traffic_summary(l))
                row["bytes_per_call"] = kernel_bytes(l, N, E)
                row["traffic"] = l["traffic"]
                imb = load_imbalance(l, in_degree, out_degree, device, r.get("registers"))
                row.update({k: imb[k] for k in ("blocks", "resident_blocks", "worker", "workers",
                                                "busiest_block_over_mean", "busiest_worker_over_mean",
                                                "largest_task_over_mean_worker")})
                rows.append(row)
                if on_kernel:
                    on_kernel(row)
    return rows
