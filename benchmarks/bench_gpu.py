"""Seastar against PyG on a GPU, in one go and within a time budget: epochs, memory, profiles, bandwidth.

    python benchmarks/bench_gpu.py --out DIR [--budget 330] [--device cuda|cpu] [--smoke]
                                   [--graphs pl1m,pl4m,cora] [--widths 64,16,256]
                                   [--layers gcn,gat,sage,gin,appnp] [--impls fused,pyg,pyg_csr,pyg_compile]
                                   [--epochs 5] [--warmup 2] [--no-profile]

The model of ``run.py`` (``_child.build_model``: the layer F -> F, ReLU, Linear(F, 16),
cross-entropy over all vertices, Adam) for GCN, GAT (4 heads x F/4), SAGE-mean, GIN and APPNP
(K=10), on Cora and the R-MAT graphs ``power_law_graph(1_000_000, 20)`` and
``power_law_graph(4_000_000, 20)``, at widths 16, 64 and 256, for seastar (``fused``) and PyG on
``edge_index`` (``pyg``), on a ``torch.sparse`` CSR ``adj_t`` (``pyg_csr``; GAT has none) and under
``torch.compile`` (``pyg_compile``).

One process per (graph, width): for each layer it builds every implementation, measures each
one's peak memory (``max_memory_allocated`` above ``memory_allocated`` before its graph and model
were built, over one steady epoch), then times ``--epochs`` rounds, each round one epoch of every
implementation in rotating order (CUDA events; median and spread = (max - min) / median), then
profiles one epoch of each under ``torch.profiler`` (device time by kernel name, the time the
device is idle between kernels, copies, synchronisations) and times every seastar program of the
layer alone, forward and backward, per kernel, against the bytes its kernels move under the
traffic model (``seastar.gpu_model``: the bytes each kernel reads and writes per edge, per
vertex and per launch, unique bytes, no cache reuse) and the copy bandwidth measured in the same
process (``dst.copy_(src)``: bytes read + written per second).

The budget (seconds of wall time, graph generation included) is spent in priority order: F=64
on the 1M and 4M graphs first, then Cora at every width, then the other widths of the large
graphs; the first groups split the budget evenly, the others share what is left; what does not
fit is listed as skipped with the reason. A group's process starts a
layer only while the budget has room for its longest layer so far, and an implementation only
before the deadline; a layer started in time finishes. ``torch.compile`` compiles per graph and
width (tens of seconds per layer), so ``pyg_compile`` runs in the first group only, unless
``--compile-all``.
Ratios are seastar's time over the fastest peer measured in the same group (< 1 favours seastar).

``--smoke`` runs on small graphs (the CPU when there is no GPU): the same code paths, for the
test that keeps this script working. PyG missing: its rows say unavailable. Writes
``bench.json`` and ``bench.md`` into ``--out``.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

from _paths import portable  # noqa: E402
from _spawn import spawn_json  # noqa: E402

GRAPHS = {"cora": ("Cora", None), "pl1m": ("power law 1M", 1_000_000), "pl4m": ("power law 4M", 4_000_000),
          "pl2k": ("power law 2k", 2_000), "pl20k": ("power law 20k", 20_000)}
AVG_DEGREE = 20
LAYERS = ("gcn", "gat", "sage", "gin", "appnp")
IMPLS = ("fused", "pyg_csr", "pyg", "pyg_compile")  # the order a layer builds them in: the strongest peer first
PEERS = ("pyg", "pyg_csr", "pyg_compile")
NO_CSR = "PyG's GATConv has no torch.sparse adj_t path"
MIN_GROUP_S = 20.0  # a group starts only with this much budget left (imports, the copy bandwidth, a layer)
GRACE_S = 60.0      # past the budget, before a group's process is killed (a layer started in time finishes)


def log(msg: str) -> None:
    print(msg, flush=True)


# -- the plan ----------------------------------------------------------------------------------
def plan_groups(graphs, widths):
    """(graph, width) groups in priority order: F=64 on the large graphs, Cora, the rest."""
    order = []
    large = [g for g in graphs if g != "cora"]
    first_width = 64 if 64 in widths else widths[0]
    order += [(g, first_width) for g in large]
    order += [("cora", w) for w in ([first_width] + [w for w in widths if w != first_width]) if "cora" in graphs]
    order += [(g, w) for w in widths if w != first_width for g in large]
    return order


def prepare_graph(name, workdir) -> dict:
    import torch
    import seastar as ss
    t0 = time.perf_counter()
    label, n = GRAPHS[name]
    if n is None:
        ds = ss.datasets.load(name, build_graph=False)
    else:
        ds = ss.datasets.power_law_graph(n, AVG_DEGREE, seed=0, build_graph=False)
    ei, N = ds.edge_index, ds.num_nodes
    path = os.path.join(workdir, f"{name}.pt")
    torch.save(ei.contiguous(), path)
    in_deg = torch.bincount(ei[1], minlength=N)
    info = dict(name=name, label=label, num_nodes=int(N), num_edges=int(ei.shape[1]), edge_index_path=path,
                max_in_degree=int(in_deg.max()), no_in_edges=int((in_deg == 0).sum()),
                generate_s=time.perf_counter() - t0)
    log(f"[graph] {label}: {N} vertices, {info['num_edges']} edges, largest in-degree {info['max_in_degree']} "
        f"({info['generate_s']:.1f} s)")
    return info


# -- the child: one (graph, width) -------------------------------------------------------------
def _sync(device):
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class Timer:
    """CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device):
        import torch
        self.cuda = device.startswith("cuda")
        self.torch = torch

    def __call__(self, fn):
        if self.cuda:
            a, b = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            return a.elapsed_time(b)
        t0 = time.perf_counter()
        fn()
        return 1e3 * (time.perf_counter() - t0)


def copy_bandwidth(device) -> float:
    """Bytes read + written per second by ``dst.copy_(src)`` of 1 GiB (64 MiB on the CPU), best of 5."""
    import torch
    n = (2**30 if device.startswith("cuda") else 2**26) // 4
    src, dst = torch.ones(n, device=device), torch.empty(n, device=device)
    timer = Timer(device)
    dst.copy_(src)
    best = min(timer(lambda: dst.copy_(src)) for _ in range(5))
    del src, dst
    return 2 * n * 4 / (best / 1e3)


def _mem(device):
    import torch
    return torch.cuda.memory_allocated() if device.startswith("cuda") else 0


def profile_epoch(epoch, device) -> dict:
    """One epoch under torch.profiler: device time per kernel name, idle time between kernels,
    copies and synchronisations (on the CPU: self time per op)."""
    from torch.profiler import ProfilerActivity, profile
    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    epoch()
    _sync(device)
    with profile(activities=acts) as prof:
        t0 = time.perf_counter()
        epoch()
        _sync(device)
        wall_ms = 1e3 * (time.perf_counter() - t0)
    kernels, copies, syncs, intervals = {}, {}, {}, []
    for ev in prof.events():
        name = ev.name
        on_device = cuda and str(getattr(ev, "device_type", "")).endswith("CUDA")
        if on_device:
            dur = (ev.time_range.end - ev.time_range.start) / 1e3
            if "memcpy" in name.lower() or "memset" in name.lower():
                copies[name] = copies.get(name, 0.0) + dur
            else:
                kernels[name] = kernels.get(name, 0.0) + dur
                intervals.append((ev.time_range.start, ev.time_range.end))
        elif "Synchronize" in name or name in ("cudaMemcpy", "aten::item", "aten::_local_scalar_dense"):
            syncs[name] = syncs.get(name, 0) + 1
        elif not cuda and name.startswith(("aten::", "seastar::")):  # self time: nested ops count once
            kernels[name] = kernels.get(name, 0.0) + ev.self_cpu_time_total / 1e3
    busy_ms = span_ms = 0.0
    if intervals:
        intervals.sort()
        start, end = intervals[0]
        for a, b in intervals[1:]:
            if a > end:
                busy_ms += (end - start) / 1e3
                start, end = a, b
            else:
                end = max(end, b)
        busy_ms += (end - start) / 1e3
        span_ms = (max(b for _, b in intervals) - intervals[0][0]) / 1e3
    top = dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:12])
    return dict(wall_ms=wall_ms, kernel_ms=sum(kernels.values()), kernels_top_ms=top, kernel_names=len(kernels),
                device_busy_ms=busy_ms if cuda else None, device_span_ms=span_ms if cuda else None,
                device_idle_ms=(span_ms - busy_ms) if cuda else None, host_gap_ms=(wall_ms - busy_ms) if cuda else None,
                copies_ms=copies, synchronisations=syncs)


def kernel_bandwidth(programs, device, copy_bps, repeats=3) -> list:
    """Each seastar program of the layer alone, forward and backward: per kernel, the device time
    (profiler) and the bytes its traffic model says it moves, as bytes per second and a
    fraction of the copy bandwidth. On the CPU: one row per direction (no per-kernel times)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from seastar import gpu_model
    rows = []
    cuda = device.startswith("cuda")
    for name, compiled, graph, tensors in programs:
        N, E = graph.num_nodes, graph.num_edges  # the graph it ran on (self loops added, for GCN)
        fp = compiled.kernels
        run = {}
        with torch.no_grad():
            outs = fp.run_forward(graph._g, tensors)
            run["forward"] = lambda: fp.run_forward(graph._g, tensors)
            if compiled.lowered.wrt:
                grads = [torch.randn_like(o) for o in outs]
                run["backward"] = lambda: fp.run_backward(graph._g, tensors, grads)
            for direction, fn in run.items():
                launches = gpu_model.launches(compiled, direction)
                fn()
                _sync(device)
                times = {}
                if cuda:
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        for _ in range(repeats):
                            fn()
                        _sync(device)
                    for ev in prof.events():
                        if str(getattr(ev, "device_type", "")).endswith("CUDA"):
                            times[ev.name] = times.get(ev.name, 0.0) + (ev.time_range.end - ev.time_range.start) / 1e3
                else:
                    timer = Timer(device)
                    times["(all kernels)"] = sum(timer(fn) for _ in range(repeats))
                total_bytes = 0
                for l in launches:
                    b = gpu_model.kernel_bytes(l, N, E)
                    total_bytes += b
                    if cuda and gpu_model.is_aggregation(l):
                        ms = times.get(l["name"], 0.0) / repeats
                        s = gpu_model.traffic_summary(l)
                        rows.append(dict(program=name, direction=direction, kernel=l["name"], what=l["what"],
                                         group_threads=l["group_threads"], bytes_per_edge=s["bytes_per_edge"],
                                         bytes_per_vertex=s["bytes_per_vertex"], bytes=b, ms=ms,
                                         gbps=b / ms / 1e6 if ms else None,
                                         of_copy=(b / ms * 1e3) / copy_bps if ms else None))
                if not cuda:
                    ms = times["(all kernels)"] / repeats
                    rows.append(dict(program=name, direction=direction, kernel="(all kernels)", what="every kernel",
                                     bytes=total_bytes, ms=ms, gbps=total_bytes / ms / 1e6 if ms else None,
                                     of_copy=(total_bytes / ms * 1e3) / copy_bps if ms else None))
    return rows


def run_child(cfg) -> dict:
    import torch
    import torch.nn.functional as Fn
    import _child
    from _child import NUM_CLASSES, _warm_libraries, build_model, make_graph
    device, F, deadline = cfg["device"], cfg["width"], cfg["deadline"]
    try:
        import torch_geometric.nn  # noqa: F401
        pyg = None
    except Exception as exc:  # noqa: BLE001 (any import failure makes the rows unavailable)
        pyg = f"unavailable: PyG does not import ({type(exc).__name__}: {str(exc)[:200]})"
    from seastar import gpu_model
    torch.manual_seed(0)
    _warm_libraries(device)
    copy_bps = copy_bandwidth(device)
    N = cfg["num_nodes"]
    x = torch.randn(N, F, device=device)
    y = torch.randint(0, NUM_CLASSES, (N,), device=device)
    timer = Timer(device)
    cuda = device.startswith("cuda")
    # every layer of an implementation runs on the same graph object, built once (a 4M graph
    # takes seconds to index); its device bytes are counted in each layer's peak
    edge_index = _child.load_edge_index(cfg)
    _child.load_edge_index = lambda _cfg: edge_index
    graphs, graph_bytes = {}, {}

    def graph_for(impl, layer):
        kind = "pyg" if impl == "pyg_compile" else impl
        if kind not in graphs:
            before = _mem(device)
            graphs[kind] = make_graph(cfg, impl, device, layer)
            graph_bytes[kind] = _mem(device) - before
        return graphs[kind], graph_bytes[kind]

    out = dict(status="ok", copy_gbps=copy_bps / 1e9, layers=[])
    longest = 0.0  # the longest layer so far: a layer starts only when that much time is left
    for layer in cfg["layers"]:
        if time.time() + longest > deadline:
            out["layers"].append(dict(layer=layer, status="skipped", reason="out of budget", impls={}))
            log(f"[{cfg['graph']} F={F}] {layer}: skipped, out of budget")
            continue
        t_layer = time.time()
        rec = dict(layer=layer, impls={})
        live = {}
        for impl in cfg["impls"]:
            if impl == "pyg_compile" and not cfg["compile"]:
                rec["impls"][impl] = dict(status="skipped", reason="torch.compile only in the first group "
                                          "(it compiles per graph and width; --compile-all for every group)")
                continue
            if time.time() > deadline:
                rec["impls"][impl] = dict(status="skipped", reason="out of budget")
                continue
            if impl.startswith("pyg") and pyg:
                rec["impls"][impl] = dict(status="unavailable", reason=pyg)
                continue
            if impl == "pyg_csr" and layer == "gat":
                rec["impls"][impl] = dict(status="unavailable", reason=NO_CSR)
                continue
            try:
                if cuda:
                    torch.cuda.empty_cache()
                g, g_bytes = graph_for(impl, layer)
                base = _mem(device) - g_bytes
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                model = build_model(layer, impl, F).to(device)
                opt = torch.optim.Adam(model.parameters(), lr=0.01)

                def epoch(model=model, opt=opt, g=g):
                    opt.zero_grad(set_to_none=True)
                    Fn.cross_entropy(model(g, x), y).backward()
                    opt.step()

                first = timer(epoch)
                for _ in range(cfg["warmup"] + (1 if impl == "pyg_compile" else 0)):
                    timer(epoch)
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                steady = timer(epoch)
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else None
                live[impl] = (epoch, g)
                rec["impls"][impl] = dict(status="ok", first_epoch_ms=first, peak_mem_mb=peak, epochs_ms=[steady])
            except Exception as exc:  # noqa: BLE001 (out of memory, a peer's failure: recorded, the rest goes on)
                rec["impls"][impl] = dict(status="failed", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                live.pop(impl, None)
                if cuda:
                    torch.cuda.empty_cache()
        names = list(live)
        for r in range(cfg["epochs"]):  # interleaved, in rotating order
            for impl in names[r % max(len(names), 1):] + names[: r % max(len(names), 1)]:
                if impl not in live:
                    continue
                try:
                    rec["impls"][impl]["epochs_ms"].append(timer(live[impl][0]))
                except Exception as exc:  # noqa: BLE001 (memory taken by the others: this one fails alone)
                    rec["impls"][impl] = dict(status="failed", reason=f"{type(exc).__name__}: "
                                              f"{str(exc).splitlines()[0][:300]}")
                    live.pop(impl)
                    if cuda:
                        torch.cuda.empty_cache()
        names = [n for n in names if n in live]
        for impl in names:
            ep = rec["impls"][impl]["epochs_ms"][1:] or rec["impls"][impl]["epochs_ms"]
            med = statistics.median(ep)
            rec["impls"][impl].update(epoch_ms=med, spread=(max(ep) - min(ep)) / med if med else None)
        if cfg["profile"] and time.time() < deadline:
            for impl in names:
                try:
                    rec["impls"][impl]["profile"] = profile_epoch(live[impl][0], device)
                except Exception as exc:  # noqa: BLE001
                    rec["impls"][impl]["profile"] = dict(status="failed", reason=f"{type(exc).__name__}: {exc}"[:300])
        if "fused" in live and time.time() < deadline:
            with gpu_model.record_programs() as rp:
                live["fused"][0]()
            progs = []
            for name, compiled in rp.programs:
                progs.append((name, compiled) + rp.calls[id(compiled)])
            try:
                rec["kernels"] = kernel_bandwidth(progs, device, copy_bps)
            except Exception as exc:  # noqa: BLE001
                rec["kernels_error"] = f"{type(exc).__name__}: {exc}"[:300]
        best = min(((rec["impls"][p]["epoch_ms"], p) for p in PEERS if "epoch_ms" in rec["impls"].get(p, {})),
                   default=None)
        fused_ms = rec["impls"].get("fused", {}).get("epoch_ms")
        if best and fused_ms:
            rec.update(best_peer=best[1], best_peer_ms=best[0], ratio_vs_best=fused_ms / best[0])
        out["layers"].append(rec)
        longest = max(longest, time.time() - t_layer)
        del live
        if cuda:
            torch.cuda.empty_cache()
        log(f"[{cfg['graph']} F={F}] {layer}: " + ", ".join(
            f"{k} {v['epoch_ms']:.2f} ms" if "epoch_ms" in v else f"{k} {v['status']}" for k, v in rec["impls"].items()))
    return out


# -- the parent --------------------------------------------------------------------------------
def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def write_report(out_dir, result) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bench.json"), "w") as fh:
        json.dump(portable(result), fh, indent=1)
    lines = [f"# Seastar against PyG on {result['device_name']}", "",
             f"{result['command']}", "",
             f"Budget {result['budget_s']:.0f} s, used {result['wall_s']:.0f} s. Epoch: median of the interleaved "
             "rounds, spread (max - min) / median; peak: max_memory_allocated above the allocation before the "
             "implementation's graph and model; ratio: seastar over the fastest peer of the row (< 1 favours seastar).",
             "", "| graph | F | layer | " + " | ".join(IMPLS) + " | best peer | ratio |",
             "| --- | --- | --- | " + " | ".join("---" for _ in IMPLS) + " | --- | --- |"]
    for grp in result["groups"]:
        for rec in grp.get("layers", []):
            cells = []
            for impl in IMPLS:
                r = rec.get("impls", {}).get(impl)
                if not r:
                    cells.append("-")
                elif r.get("status") == "ok":
                    mem = f", {r['peak_mem_mb']:.0f} MB" if r.get("peak_mem_mb") is not None else ""
                    cells.append(f"{r['epoch_ms']:.2f} ms ±{100 * (r.get('spread') or 0):.0f}%{mem}")
                else:
                    cells.append(r.get("status", "?"))
            lines.append(f"| {grp['graph']} | {grp['width']} | {rec['layer']} | " + " | ".join(cells) +
                         f" | {rec.get('best_peer', '-')} | {fmt(rec.get('ratio_vs_best'))} |")
    lines += ["", "## Where the time goes (one profiled epoch)", "",
              "| graph | F | layer | impl | wall ms | kernels ms | device idle ms | copies ms | syncs | top kernels |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for grp in result["groups"]:
        for rec in grp.get("layers", []):
            for impl, r in rec.get("impls", {}).items():
                p = r.get("profile")
                if not p or "wall_ms" not in p:
                    continue
                top = "; ".join(f"{k[:40]} {v:.2f}" for k, v in list(p["kernels_top_ms"].items())[:3])
                lines.append(f"| {grp['graph']} | {grp['width']} | {rec['layer']} | {impl} | {p['wall_ms']:.2f} | "
                             f"{p['kernel_ms']:.2f} | {fmt(p['device_idle_ms'])} | {sum(p['copies_ms'].values()):.2f} | "
                             f"{sum(p['synchronisations'].values())} | {top} |")
    lines += ["", "## Seastar's aggregation kernels against the copy bandwidth", "",
              "Bytes: the traffic model of each kernel (seastar.gpu_model: unique bytes read and written per edge, "
              "per vertex and per launch, no cache reuse).", "",
              "| graph | F | layer | program | direction | kernel | B/edge | ms | GB/s | of copy |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for grp in result["groups"]:
        for rec in grp.get("layers", []):
            for k in rec.get("kernels", []):
                lines.append(f"| {grp['graph']} | {grp['width']} | {rec['layer']} | {k['program']} | {k['direction']} | "
                             f"{k['kernel']} | {k.get('bytes_per_edge', '-')} | {fmt(k['ms'], '.3f')} | {fmt(k['gbps'], '.0f')} | "
                             f"{fmt(k['of_copy'])} |")
    if result["skipped"]:
        lines += ["", "## Skipped", ""] + [f"- {s['graph']} F={s['width']}: {s['reason']}" for s in result["skipped"]]
    with open(os.path.join(out_dir, "bench.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for bench.json and bench.md (required)")
    ap.add_argument("--budget", type=float, default=330.0, help="seconds of wall time for everything")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--smoke", action="store_true", help="small graphs and few epochs: the CI check")
    ap.add_argument("--graphs", default=None)
    ap.add_argument("--widths", default=None)
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--compile-all", action="store_true", help="pyg_compile in every group, not only the first")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        res = run_child(json.loads(args.child))
        print(json.dumps(res), flush=True)
        return
    if not args.out:
        ap.error("the following arguments are required: --out")
    t_start = time.time()
    device = args.device
    if device is None or device.startswith("cuda"):  # the children do the work: on the CPU this one needs no torch
        import torch
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            sys.exit("bench_gpu.py: --device cuda, but torch sees no GPU")
    graphs = (args.graphs or ("pl2k" if args.smoke else "pl1m,pl4m,cora")).split(",")
    widths = [int(w) for w in (args.widths or ("16" if args.smoke else "64,16,256")).split(",")]
    layers, impls = args.layers.split(","), args.impls.split(",")
    for what, got, known in (("graph", graphs, GRAPHS), ("layer", layers, LAYERS), ("implementation", impls, IMPLS)):
        bad = [g for g in got if g not in known]
        if bad:
            sys.exit(f"bench_gpu.py: unknown {what} {bad}; known: {', '.join(known)}")
    if args.budget <= 0:
        sys.exit("bench_gpu.py: --budget must be positive")
    epochs = args.epochs or (2 if args.smoke else 5)
    warmup = args.warmup if args.warmup is not None else (1 if args.smoke else 2)
    workdir = tempfile.mkdtemp(prefix="seastar-bench-gpu-")
    result = dict(command="python " + " ".join([os.path.relpath(__file__, ROOT)] + sys.argv[1:]), device=device,
                  device_name=torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "CPU",
                  torch=sys.modules["torch"].__version__ if "torch" in sys.modules else importlib.metadata.version("torch"),
                  budget_s=args.budget, epochs=epochs, warmup=warmup, groups=[], skipped=[])
    info = {}
    groups = plan_groups(graphs, widths)
    # the first groups (F=64 on the large graphs) split the budget evenly among themselves, so
    # the 1M graph's torch.compile cannot starve the 4M graph; the rest share what is left
    first = [gw for gw in groups if gw[1] == groups[0][1] and gw[0] != "cora"]
    for graph, width in groups:
        left = args.budget - (time.time() - t_start)
        if graph not in info:
            if left < 10:
                result["skipped"].append(dict(graph=graph, width=width, reason="out of budget before the graph was made"))
                continue
            info[graph] = prepare_graph(graph, workdir)
            left = args.budget - (time.time() - t_start)
        g = info[graph]
        if left < MIN_GROUP_S:
            if (graph, width) in first:
                first.remove((graph, width))
            result["skipped"].append(dict(graph=graph, width=width, reason=f"{left:.0f} s of the budget left"))
            log(f"[skip] {graph} F={width}: {left:.0f} s of the budget left")
            continue
        deadline = t_start + args.budget - 5
        if (graph, width) in first:
            deadline = min(deadline, time.time() + left / len(first) - 5)
            first.remove((graph, width))
        cfg = dict(g, graph=graph, width=width, device=device, layers=layers, impls=impls, epochs=epochs,
                   warmup=warmup, profile=not args.no_profile, deadline=deadline,
                   compile=args.compile_all or not result["groups"])
        t0 = time.time()
        # the child keeps the deadline between layers; the grace lets a started layer finish
        res = spawn_json(__file__, cfg, threads=os.cpu_count() or 1, timeout=left + GRACE_S)
        took = time.time() - t0
        res.update(graph=graph, width=width, num_nodes=g["num_nodes"], num_edges=g["num_edges"],
                   max_in_degree=g["max_in_degree"], wall_s=took)
        result["groups"].append(res)
        result["graphs"], result["wall_s"] = info, time.time() - t_start
        write_report(args.out, result)  # after every group: a run cut off from outside keeps what it measured
        if res.get("status") != "ok":
            log(f"[{graph} F={width}] {res.get('status')}: {res.get('reason')}\n{res.get('stderr_tail', '')}")
        for rec in res.get("layers", []):
            if "ratio_vs_best" in rec:
                log(f"[ratio] {graph} F={width} {rec['layer']}: seastar {rec['impls']['fused']['epoch_ms']:.2f} ms, "
                    f"best peer {rec['best_peer']} {rec['best_peer_ms']:.2f} ms: {rec['ratio_vs_best']:.2f}x")
    shutil.rmtree(workdir, ignore_errors=True)  # the edge lists (1.3 GB for the 4M graph)
    result["graphs"] = info
    result["wall_s"] = time.time() - t_start
    write_report(args.out, result)
    log(f"wrote {os.path.join(args.out, 'bench.json')} and bench.md ({result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
