"""R-GCN training epochs: seastar's RGCNConv against a plain-torch per-relation loop and PyG.

    python benchmarks/bench_rgcn.py --threads 1 [--quick] [--out benchmarks/results/bench_rgcn.json]
                                    [--graph typed|powerlaw] [--nodes N] [--edges E] [--relations R]
                                    [--features F] [--layers 1|2] [--impls loop,pyg,...]

Workload: a synthetic typed graph (``--graph typed``: ``seastar.datasets.typed_graph``, uniform
endpoints and uniform relations; ``--graph powerlaw``: ``seastar.datasets.power_law_graph`` with a
uniform random relation per edge, so hubs send many edges of each relation), by default 100k
vertices, 2M edges, 50 relations, random features of width 64. One training epoch = forward,
cross-entropy over all vertices (F classes), backward and an Adam step of ``--layers`` RGCNConv
layers (F -> F, ReLU between two), with trainable relation weights ``W`` [R, F, F], root weight
and bias (``aggr="mean"``: ``1 / |N_r(i)|`` per relation). With ``--num-bases B`` every
implementation uses the basis decomposition ``W_r = sum_b comp[r, b] V_b`` (trainable ``V``
[B, F, F] and ``comp`` [R, B]); without it, no decomposition.

Implementations, all in the same run with the same thread count, each in its own subprocess:

* ``loop``: plain torch, one pass per relation: ``out.index_add_(0, dst_r, (x[src_r] @ W_r) * norm_r)``
  with the per-relation edge lists and norms computed once at setup (graph preprocessing);
* ``pyg``: ``torch_geometric.nn.RGCNConv`` (``aggr="mean"``; without pyg_lib it loops over
  relations: mask the edges, mean-aggregate ``x`` per relation, then ``h_r @ W_r``);
* ``pyg_fast``: ``torch_geometric.nn.FastRGCNConv`` (``x_j @ W[edge_type]`` as one bmm: an
  ``[E, in, out]`` weight gather);
* ``seastar_per_edge`` / ``seastar_per_pair`` / ``seastar_per_run`` / ``seastar_per_basis`` (with
  ``--num-bases`` only) / ``seastar_auto``: ``seastar.nn.RGCNConv`` with ``mode=...`` on the
  fused backend (``backend="fused"``: it fails rather than falling back).

Measured per configuration (CPU): median epoch time over ``--repeats`` epochs after the first one
(tracing, kernel compile or load) and ``--warmup`` more; the median split into
forward (+ loss), backward and optimizer step; peak RSS of the training epochs (the high-water
mark is reset through ``/proc/self/clear_refs`` once the graph, inputs, model and optimizer exist
and each implementation's per-graph preprocessing is done: the loop's per-relation edge lists, and
for seastar one forward pass under ``no_grad``, which builds its cached per-graph structures;
their resident size is part of ``rss_after_setup_mb`` and of the peak),
``peak_mem_mb`` = that peak minus the RSS after the imports (so PyG's heavier import does not
count), and ``step_added_mb`` = that peak minus the RSS after setup: the memory an epoch adds on
top of what the graph, the inputs and the preprocessed structures hold (anything first built
in the first epoch, e.g. the reversed run plan or the backward kernels, counts here).
Each child runs under an address-space limit of ``--mem-budget-gb`` above its post-import size
(a shared machine must not be pushed into the OOM killer) and a wall-clock limit of ``--timeout``;
an implementation that runs out of either is recorded as ``oom`` / ``timeout``.

Before timing, one child checks on a small graph in float64 that every implementation gives the
same output and the same gradients (x, W, root, bias) as the loop, to ``--tol`` (1e-8).

PyG is optional (``benchmarks/requirements.txt``; CI does not install it): without it, or with
``--no-pyg``, its configurations are recorded as ``unavailable`` and its ratios as null.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

IMPLS = ("loop", "pyg", "pyg_fast", "seastar_per_edge", "seastar_per_pair", "seastar_per_run", "seastar_per_basis",
         "seastar_auto")
NEEDS_BASES = ("seastar_per_basis",)
BASELINES = ("loop", "pyg", "pyg_fast")
SEASTAR = tuple(i for i in IMPLS if i.startswith("seastar"))
PYG_IMPLS = ("pyg", "pyg_fast")
TARGET_SPEEDUP, TARGET_MEMORY_RATIO = 3.0, 5.0  # aimed at (issue 6), reported, not asserted


# ---- memory ----------------------------------------------------------------------------------------

from _proc_memory import hwm_mb, maxrss_mb, reset_peak, rss_mb, vm_bytes  # noqa: E402  (benchmarks/, this script's folder)
from _spawn import spawn_json  # noqa: E402


def limit_memory(budget_gb: float) -> None:
    """Address-space limit of the current size + budget: a too-large allocation fails in this
    process (RuntimeError from torch's allocator) instead of waking the OOM killer."""
    if budget_gb > 0:
        lim = vm_bytes() + int(budget_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, resource.RLIM_INFINITY))


def is_oom(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, MemoryError) or "memory" in msg or "can't allocate" in msg or "cannot allocate" in msg


# ---- the models -------------------------------------------------------------------------------------

def per_relation_edges(edge_index, edge_type, num_nodes: int, num_relations: int, dtype):
    """Edges grouped by relation: lists of (src_r, dst_r, norm_r [E_r, 1]) with the RGCNConv
    ``aggr="mean"`` normalisation ``1 / |N_r(dst)|`` (multi-edges counted)."""
    import torch
    src, dst = edge_index[0].long(), edge_index[1].long()
    t = edge_type.long()
    key = dst * num_relations + t
    count = torch.bincount(key, minlength=num_nodes * num_relations)
    norm = (1.0 / count[key].to(torch.float64)).to(dtype).unsqueeze(-1)
    del key, count
    order = torch.argsort(t, stable=True)
    counts = torch.bincount(t, minlength=num_relations).tolist()
    src_s, dst_s, norm_s = src[order], dst[order], norm[order]
    return list(zip(torch.split(src_s, counts), torch.split(dst_s, counts), torch.split(norm_s, counts)))


def make_loop_conv(in_channels: int, out_channels: int, num_relations: int, num_bases=None):
    import torch
    from torch import nn

    class LoopRGCNConv(nn.Module):
        """``out = x @ root + bias + sum_r index_add(dst_r, (x[src_r] @ W_r) * norm_r)``
        (``W_r = sum_b comp[r, b] weight[b]`` with bases)."""

        def __init__(self):
            super().__init__()
            if num_bases is None:
                self.weight = nn.Parameter(torch.empty(num_relations, in_channels, out_channels))
                self.comp = None
            else:
                self.weight = nn.Parameter(torch.empty(num_bases, in_channels, out_channels))
                self.comp = nn.Parameter(torch.empty(num_relations, num_bases))
            self.root = nn.Parameter(torch.empty(in_channels, out_channels))
            self.bias = nn.Parameter(torch.empty(out_channels))

        def forward(self, rel_edges, x):
            W = self.weight if self.comp is None else torch.einsum("rb,bio->rio", self.comp, self.weight)
            acc = x.new_zeros(x.shape[0], out_channels)
            for r, (src_r, dst_r, norm_r) in enumerate(rel_edges):
                if src_r.numel():
                    acc.index_add_(0, dst_r, (x.index_select(0, src_r) @ W[r]) * norm_r)
            return acc + x @ self.root + self.bias

    return LoopRGCNConv()


def make_conv(impl: str, in_channels: int, out_channels: int, num_relations: int, num_bases=None):
    """One layer of ``impl``; parameters are ``weight`` [R, in, out] (or [B, in, out] and ``comp``
    [R, B] with bases), ``root`` [in, out], ``bias``."""
    if impl == "loop":
        return make_loop_conv(in_channels, out_channels, num_relations, num_bases)
    if impl == "pyg":
        from torch_geometric.nn import RGCNConv
        return RGCNConv(in_channels, out_channels, num_relations, num_bases=num_bases, aggr="mean")
    if impl == "pyg_fast":
        from torch_geometric.nn import FastRGCNConv
        return FastRGCNConv(in_channels, out_channels, num_relations, num_bases=num_bases, aggr="mean")
    if impl.startswith("seastar_"):
        import seastar as ss
        return ss.nn.RGCNConv(in_channels, out_channels, num_relations, num_bases=num_bases, aggr="mean",
                              mode=impl[len("seastar_"):], backend="fused")
    raise ValueError(impl)


def set_params(conv, seed: int, dtype) -> None:
    """The same seeded values in every implementation (glorot-like scale, non-zero bias)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ("weight", "comp", "root", "bias"):
            p = getattr(conv, name, None)
            if p is None:
                continue
            fan = p.shape[-2] + p.shape[-1] if p.dim() >= 2 else p.shape[0]
            p.copy_((torch.rand(p.shape, generator=g, dtype=torch.float64) * 2 - 1) * (6.0 / fan) ** 0.5)
    conv.to(dtype)


def make_input(impl: str, edge_index, edge_type, num_nodes: int, num_relations: int, dtype):
    """What the layer takes as its graph: a seastar Graph, PyG's (edge_index, edge_type), or
    the loop's per-relation edge lists."""
    if impl.startswith("seastar"):
        import seastar as ss
        return ss.Graph.from_edge_index(edge_index, num_nodes=num_nodes, edge_type=edge_type,
                                        num_edge_types=num_relations)
    if impl in PYG_IMPLS:
        return (edge_index, edge_type)
    return per_relation_edges(edge_index, edge_type, num_nodes, num_relations, dtype)


def call_conv(impl: str, conv, g, x):
    if impl in PYG_IMPLS:
        return conv(x, g[0], g[1])
    return conv(g, x)


def build_net(impl: str, F: int, R: int, layers: int, seed: int, dtype, num_bases=None):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.ModuleList([make_conv(impl, F, F, R, num_bases) for _ in range(layers)])
            for i, c in enumerate(self.convs):
                set_params(c, seed + 1 + i, dtype)

        def forward(self, g, x):
            for i, c in enumerate(self.convs):
                if i:
                    x = torch.relu(x)
                x = call_conv(impl, c, g, x)
            return x

    return Net()


# ---- children ---------------------------------------------------------------------------------------

def _warm_libraries() -> None:
    """One tiny Adam step, so lazily loaded torch pieces count as library overhead alike."""
    import torch
    lin = torch.nn.Linear(4, 4)
    opt = torch.optim.Adam(lin.parameters(), lr=0.01)
    torch.nn.functional.cross_entropy(torch.relu(lin(torch.randn(8, 4))), torch.zeros(8, dtype=torch.long)).backward()
    opt.step()


def run_train(cfg: dict) -> dict:
    import torch
    import torch.nn.functional as Fn
    impl = cfg["impl"]
    if impl in PYG_IMPLS:
        import torch_geometric  # noqa: F401  (imported before the baseline RSS is taken)
        import torch_geometric.nn  # noqa: F401
    else:
        import seastar  # noqa: F401
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    _warm_libraries()
    rss_import = rss_mb()
    limit_memory(cfg["mem_budget_gb"])

    N, F, R, dtype = cfg["num_nodes"], cfg["features"], cfg["relations"], torch.float32
    t0 = time.perf_counter()
    data = torch.load(cfg["graph_path"], weights_only=True)
    g = make_input(impl, data["edge_index"], data["edge_type"], N, R, dtype)
    del data
    gen = torch.Generator().manual_seed(cfg["seed"])
    x = torch.randn(N, F, generator=gen)
    y = torch.randint(0, F, (N,), generator=gen)
    model = build_net(impl, F, R, cfg["layers"], cfg["seed"], dtype, cfg.get("num_bases"))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    if impl.startswith("seastar"):
        # graph preprocessing, as the loop's per-relation edge lists in make_input: seastar builds
        # its per-graph structures (norms, CSC-ordered copy, run plans) on first sight of a graph
        with torch.no_grad():
            model(g, x)
    t_setup = time.perf_counter() - t0
    rss_setup = rss_mb()
    setup_peak = maxrss_mb()
    hiwater_reset = reset_peak()

    def epoch():
        t_a = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = Fn.cross_entropy(model(g, x), y)
        t_b = time.perf_counter()
        loss.backward()
        t_c = time.perf_counter()
        opt.step()
        t_d = time.perf_counter()
        return t_d - t_a, t_b - t_a, t_c - t_b, t_d - t_c, float(loss)

    t0 = time.perf_counter()
    first = epoch()  # tracing, kernel compile or load, per-graph caches (seastar), lazy init
    for _ in range(cfg["warmup"]):
        epoch()
    runs = [epoch() for _ in range(cfg["repeats"])]
    peak = hwm_mb() if hiwater_reset else maxrss_mb()
    t_measure = time.perf_counter() - t0
    med = lambda i: 1e3 * statistics.median(r[i] for r in runs)  # noqa: E731
    out = dict(status="ok", epoch_ms=med(0), forward_ms=med(1), backward_ms=med(2), step_ms=med(3),
               epoch_ms_all=[1e3 * r[0] for r in runs], first_epoch_ms=1e3 * first[0],
               loss_first=first[4], loss_last=runs[-1][4],
               peak_rss_mb=peak if hiwater_reset else max(peak, setup_peak),
               peak_mem_mb=peak - rss_import, step_added_mb=(peak - rss_setup) if hiwater_reset else None,
               rss_after_import_mb=rss_import, rss_after_setup_mb=rss_setup, setup_peak_rss_mb=setup_peak,
               hiwater_reset=hiwater_reset, setup_s=t_setup, measure_s=t_measure)
    if impl.startswith("seastar"):
        conv = model.convs[0]
        out["mode_used"] = conv.last_mode
        from seastar.nn.rgcn_conv import relation_pairs
        out["num_pairs"] = relation_pairs(g, R).num_pairs
        out["num_runs"] = conv._num_runs(g)
    return out


def run_verify(cfg: dict) -> dict:
    """Small graph, float64: output and gradients of every implementation against the loop."""
    import torch
    torch.set_num_threads(cfg["threads"])
    import seastar as ss
    N, E, R, fin, fout = 300, 3000, 5, 7, 5
    sg = ss.datasets.typed_graph(N, E, 1, R, seed=cfg["seed"] + 7, build_graph=False)
    ei, et = sg.edge_index, sg.edge_type
    dtype = torch.float64
    gen = torch.Generator().manual_seed(cfg["seed"])
    x0 = torch.randn(N, fin, generator=gen, dtype=dtype)
    probe = torch.randn(N, fout, generator=gen, dtype=dtype)
    results, ref = {}, None
    for impl in cfg["impls"]:
        try:
            conv = make_conv(impl, fin, fout, R, cfg.get("num_bases"))
            set_params(conv, cfg["seed"] + 1, dtype)
            g = make_input(impl, ei, et, N, R, dtype)
            x = x0.clone().requires_grad_()
            out = call_conv(impl, conv, g, x)
            (out * probe).sum().backward()
            vals = {"out": out.detach(), "grad_x": x.grad, "grad_weight": conv.weight.grad,
                    "grad_root": conv.root.grad, "grad_bias": conv.bias.grad}
            if cfg.get("num_bases") is not None:
                vals["grad_comp"] = conv.comp.grad
        except Exception as exc:  # noqa: BLE001  (recorded, the check fails)
            results[impl] = dict(status="error", error=f"{type(exc).__name__}: {exc}"[:500])
            continue
        if ref is None:
            ref = vals  # the loop runs first
        diffs = {k: float((v.to(dtype) - ref[k]).abs().max()) for k, v in vals.items()}
        results[impl] = dict(status="ok", max_abs_diff=max(diffs.values()), diffs=diffs,
                             out_dtype=str(out.dtype).replace("torch.", ""))
    passed = all(r["status"] == "ok" and r["max_abs_diff"] <= cfg["tol"] and r["out_dtype"] == "float64"
                 for r in results.values())
    return dict(graph=dict(nodes=N, edges=E, relations=R, in_channels=fin, out_channels=fout),
                dtype="float64", tol=cfg["tol"], reference="loop", passed=passed, impls=results)


def child_main(cfg: dict) -> None:
    try:
        res = run_verify(cfg) if cfg["kind"] == "verify" else run_train(cfg)
    except Exception as exc:  # noqa: BLE001
        status = "oom" if is_oom(exc) else "error"
        res = dict(status=status, error=f"{type(exc).__name__}: {exc}"[:1000])
    print(json.dumps(res), flush=True)


# ---- parent -----------------------------------------------------------------------------------------

def spawn(cfg: dict, timeout: float) -> dict:
    """One child (``_spawn.spawn_json``), its failures in this script's vocabulary (oom / error)."""
    res = spawn_json(os.path.abspath(__file__), cfg, cfg["threads"], timeout)
    res["wall_s"] = res.pop("child_wall_s")
    if res.get("status") in ("killed", "failed"):
        res = dict(status="oom" if res.get("returncode") in (-9, 137) else "error",
                   returncode=res.get("returncode"), error=res.get("stderr_tail") or res["reason"],
                   wall_s=res["wall_s"])
    elif res.get("status") == "timeout":
        res = dict(status="timeout", error=f"did not finish within {timeout:.0f} s", wall_s=res["wall_s"])
    return res


def make_graph_file(args, path: str) -> dict:
    import numpy as np
    import torch
    import seastar as ss
    N, E, R = args.nodes, args.edges, args.relations
    t0 = time.perf_counter()
    if args.graph == "typed":
        sg = ss.datasets.typed_graph(N, E, 1, R, seed=args.seed, build_graph=False)
        ei, et = sg.edge_index, sg.edge_type
    else:
        sg = ss.datasets.power_law_graph(N, E / N, seed=args.seed, build_graph=False)
        ei = sg.edge_index
        rng = np.random.Generator(np.random.PCG64(args.seed + 1))
        et = torch.from_numpy(rng.integers(0, R, size=ei.shape[1], dtype=np.int64))
    torch.save({"edge_index": ei, "edge_type": et}, path)
    E = int(ei.shape[1])
    pairs = int(torch.unique(et * N + ei[0]).numel())
    indeg = torch.bincount(ei[1], minlength=N)
    return dict(kind=args.graph, nodes=N, edges=E, relations=R, features=args.features,
                src_relation_pairs=pairs, max_in_degree=int(indeg.max()),
                generate_s=time.perf_counter() - t0)


def source_state() -> dict:
    """Which code was measured: git commit, whether the tree had local changes, and a hash of
    the compiled extension module (in a shared tree it may be rebuilt between runs)."""
    import glob
    import hashlib

    def git(*a):
        r = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    so = sorted(glob.glob(os.path.join(ROOT, "python", "seastar", "_C*.so")))
    digest = None
    if so:
        with open(so[0], "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    return dict(git_commit=git("rev-parse", "HEAD"), git_dirty=bool(git("status", "--porcelain", "-uno")),
                extension_sha256=digest)


def ratio(a, b):
    return (a / b) if (a is not None and b is not None and b > 0) else None


def floor1(v):
    """Memory denominators of at least 1 MB (a step can add almost nothing on a tiny graph)."""
    return None if v is None else max(v, 1.0)


def fmt(v, spec="7.2f", none="    n/a"):
    return none if v is None else format(v, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "bench_rgcn.json"))
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2k vertices, 20k edges, 5 relations, F=16, 2 timed epochs")
    ap.add_argument("--graph", choices=("typed", "powerlaw"), default="typed")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=2_000_000)
    ap.add_argument("--relations", type=int, default=50)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--layers", type=int, choices=(1, 2), default=1)
    ap.add_argument("--num-bases", type=int, default=None,
                    help="basis decomposition in every implementation (W_r = sum_b comp[r, b] V_b)")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    ap.add_argument("--no-pyg", action="store_true", help="treat PyG as unavailable (what CI sees)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration")
    ap.add_argument("--mem-budget-gb", type=float, default=8.0,
                    help="address space a configuration may add after its imports (0: no limit)")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return
    if args.quick:
        args.nodes, args.edges, args.relations, args.features = 2000, 20_000, 5, 16
        args.repeats, args.warmup = 2, 0
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    bad = [i for i in impls if i not in IMPLS]
    if bad:
        ap.error(f"unknown implementations {bad}; choose from {IMPLS}")
    impls.sort(key=IMPLS.index)
    if args.no_pyg:
        pyg = "unavailable (--no-pyg)"
    elif importlib.util.find_spec("torch_geometric") is None:
        pyg = "unavailable (torch_geometric is not installed)"
    else:
        pyg = subprocess.run([sys.executable, "-c", "import torch_geometric as g; print(g.__version__)"],
                             capture_output=True, text=True).stdout.strip() or "unavailable (import failed)"
    have_pyg = not pyg.startswith("unavailable")

    import torch
    meta = dict(torch=torch.__version__, pyg=pyg, python=platform.python_version(), machine=platform.machine(),
                processor=platform.processor(), cpu_count=os.cpu_count(), threads=args.threads,
                layers=args.layers, num_bases=args.num_bases, repeats=args.repeats, warmup=args.warmup, timeout_s=args.timeout,
                mem_budget_gb=args.mem_budget_gb, quick=args.quick,
                targets=dict(speedup=TARGET_SPEEDUP, peak_rss_ratio=TARGET_MEMORY_RATIO),
                dtype="float32", optimizer="Adam(lr=0.01)",
                loss="cross_entropy over all vertices (F classes)", argv=sys.argv[1:])
    meta.update(source_state())
    with tempfile.TemporaryDirectory(prefix="bench_rgcn_") as tmp:
        gpath = os.path.join(tmp, "graph.pt")
        graph = make_graph_file(args, gpath)
        print(f"graph: {graph['kind']}, {graph['nodes']} vertices, {graph['edges']} edges, {graph['relations']} "
              f"relations, {graph['src_relation_pairs']} (source, relation) pairs, F={args.features}, "
              f"{args.layers} layer(s), {args.threads} thread(s); PyG: {pyg}", flush=True)
        verify = None
        if not args.no_verify:
            vimpls = [i for i in ["loop"] + impls if have_pyg or i not in PYG_IMPLS]
            vimpls = list(dict.fromkeys(vimpls))
            vimpls = [i for i in vimpls if args.num_bases is not None or i not in NEEDS_BASES]
            verify = spawn(dict(kind="verify", impls=vimpls, threads=args.threads, seed=args.seed, tol=args.tol,
                                num_bases=args.num_bases), args.timeout)
            if "impls" in verify:
                for k, v in verify["impls"].items():
                    print(f"verify {k:>17}: " + (f"max |diff| vs loop {v['max_abs_diff']:.2e}" if v["status"] == "ok"
                                                  else v["status"] + ": " + v.get("error", "")), flush=True)
            print(f"verify (float64, tol {args.tol:g}): {'passed' if verify.get('passed') else 'FAILED'}", flush=True)

        results = []
        for impl in impls:
            base = dict(impl=impl, threads=args.threads)
            if impl in PYG_IMPLS and not have_pyg:
                results.append(dict(base, status=pyg))
                print(f"{impl:>17}: {pyg}", flush=True)
                continue
            if impl in NEEDS_BASES and args.num_bases is None:
                results.append(dict(base, status="unavailable (needs --num-bases)"))
                print(f"{impl:>17}: unavailable (needs --num-bases)", flush=True)
                continue
            cfg = dict(kind="train", impl=impl, graph_path=gpath, num_nodes=graph["nodes"], relations=args.relations,
                       features=args.features, layers=args.layers, threads=args.threads, repeats=args.repeats,
                       warmup=args.warmup, seed=args.seed, mem_budget_gb=args.mem_budget_gb,
                       num_bases=args.num_bases)
            res = spawn(cfg, args.timeout)
            if res["status"] == "error" and "ImportError" in res.get("error", ""):
                # another process may be rewriting the extension module in a shared tree: one retry
                print(f"{impl:>17}: {res['error'][-200:]}; retrying once in 30 s", flush=True)
                time.sleep(30)
                res = spawn(cfg, args.timeout)
            res = dict(base, **res)
            results.append(res)
            if res["status"] == "ok":
                extra = f" [{res['mode_used']}]" if "mode_used" in res else ""
                print(f"{impl:>17}: epoch {res['epoch_ms']:9.1f} ms (fwd {res['forward_ms']:8.1f}, bwd "
                      f"{res['backward_ms']:8.1f}, step {res['step_ms']:6.1f}), first {res['first_epoch_ms']:9.1f} ms; "
                      f"peak RSS {res['peak_rss_mb']:7.0f} MB ({res['peak_mem_mb']:6.0f} above imports, "
                      f"+{fmt(res['step_added_mb'], '.0f', 'n/a')} in the epoch){extra}", flush=True)
            else:
                print(f"{impl:>17}: {res['status']}: {res.get('error', '')[-400:]}", flush=True)

    ok = {r["impl"]: r for r in results if r["status"] == "ok"}
    ratios = []
    for s in SEASTAR:
        for b in BASELINES:
            if s not in impls or b not in impls:
                continue
            rs, rb = ok.get(s), ok.get(b)
            get = lambda r, k: None if r is None else r.get(k)  # noqa: E731
            status = {r["impl"]: r["status"] for r in results}
            row = dict(seastar=s, baseline=b, seastar_status=status[s], baseline_status=status[b],
                       speedup=ratio(get(rb, "epoch_ms"), get(rs, "epoch_ms")),
                       forward_speedup=ratio(get(rb, "forward_ms"), get(rs, "forward_ms")),
                       backward_speedup=ratio(get(rb, "backward_ms"), get(rs, "backward_ms")),
                       peak_rss_ratio=ratio(get(rb, "peak_rss_mb"), get(rs, "peak_rss_mb")),
                       peak_mem_ratio=ratio(get(rb, "peak_mem_mb"), get(rs, "peak_mem_mb")),
                       step_added_ratio=ratio(get(rb, "step_added_mb"), floor1(get(rs, "step_added_mb"))))
            row["meets_speed_target"] = None if row["speedup"] is None else row["speedup"] >= TARGET_SPEEDUP
            row["meets_memory_target"] = (None if row["peak_rss_ratio"] is None
                                          else row["peak_rss_ratio"] >= TARGET_MEMORY_RATIO)
            ratios.append(row)
            print(f"{s:>17} vs {b:>8}: " + (
                f"{fmt(row['speedup'], '6.2f')}x faster, peak RSS {fmt(row['peak_rss_ratio'], '5.2f')}x lower "
                f"({fmt(row['peak_mem_ratio'], '5.2f')}x above imports, {fmt(row['step_added_ratio'], '5.2f')}x "
                f"added by the epoch)" if rb is not None and rs is not None else
                f"n/a (seastar {row['seastar_status']}, baseline {row['baseline_status']})"), flush=True)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(dict(meta=meta, graph=graph, verify=verify, results=results, ratios=ratios), fh, indent=2)
    print(f"wrote {args.out}")
    if verify is not None and not verify.get("passed"):
        sys.exit(2)


if __name__ == "__main__":
    main()
