"""Seastar against its peers (DGL, PyTorch Geometric, unfused torch): time, memory, bandwidth, plots.

    python benchmarks/run.py --out results/ [--quick] [--device cpu|cuda] [--threads 1,2]
                             [--max-nodes N] [--widths 16,64,256] [--layers gcn,gat,sage,gin,appnp]
                             [--impls fused,unfused,pyg,pyg_csr,pyg_compile,dgl] [--rounds R]
    python benchmarks/run.py --peers [--graphs pl100k] [--threads 1] [--rounds 3] ...

Workloads: GCN, GAT (4 heads x F/4), GraphSAGE-mean, GIN (sum, MLP) and APPNP (K=10) on Cora,
Citeseer and R-MAT power-law graphs (``seastar.datasets.power_law_graph``, average in-degree 20)
of 10k, 100k and 1M vertices, at feature widths 16, 64 and 256 (random features; layer F -> F,
then ReLU and a linear head to 16 classes). Implementations, all in the same run with the same
thread count, each configuration in its own process:

* ``fused``: seastar's layer with its generated kernels (``backend="fused"``);
* ``unfused``: the same layer with ``backend="reference"``, the plain-torch gather / index_add
  formulation (what message passing in PyG does internally);
* ``pyg``: PyTorch Geometric's GCNConv / GATConv / SAGEConv / GINConv / APPNP on ``edge_index``;
* ``pyg_csr``: the same PyG layers on a ``torch.sparse`` CSR ``adj_t`` (PyG's memory-efficient
  SpMM path; GAT has none);
* ``pyg_compile``: ``pyg`` under ``torch.compile`` (the compiling first epoch is not timed);
* ``dgl``: DGL 2.1's GraphConv / GATConv / SAGEConv / GINConv / APPNPConv, run by the
  interpreter of a separate environment (``benchmarks/requirements-dgl.txt``: DGL 2.1 needs
  torch 2.2), which the suite creates on first use under ``~/.cache/seastar/`` (``_peer_env.py``).

``--peers`` is the comparison against all of them: the 100k and 1M graphs, every layer, F=16
and 64, 1 and 2 threads, 3 interleaved rounds (each round runs every configuration once, the
implementations of a row in rotating order), into ``benchmarks/results/peers/``; the report
gives the median over rounds with the spread (min-max) and seastar's ratio against the best
peer of each row (the fastest, and separately the leanest, of DGL, PyG, PyG-CSR, PyG+compile).

Before a configuration runs, its peak memory is estimated (an analytic bytes model, and the
measurement on the next smaller graph scaled by the edge count) and so is its wall time (the
smaller graph's, scaled); it is skipped, with the reason recorded, when either exceeds
``--mem-budget-gb`` or ``--timeout``. Writes ``results.json``, ``results.md`` and PNG plots.

PyG and matplotlib come from ``benchmarks/requirements.txt``; they are installed into this
interpreter when missing (unless ``--no-install``, which also keeps the DGL environment from
being created), and the suite runs without them when that fails (recorded as unavailable, no
plots).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _paths import portable  # noqa: E402  (this folder)
from _spawn import spawn_json  # noqa: E402

GRAPHS = {  # name -> (label, number of vertices or None for a dataset)
    "cora": ("Cora", None),
    "citeseer": ("Citeseer", None),
    "pl10k": ("power law 10k", 10_000),
    "pl100k": ("power law 100k", 100_000),
    "pl1m": ("power law 1M", 1_000_000),
}
AVG_DEGREE = 20
LAYERS = ("gcn", "gat", "sage", "gin", "appnp")
IMPLS = ("fused", "unfused", "pyg", "pyg_csr", "pyg_compile", "dgl")
CLASSIC_IMPLS = "fused,unfused,pyg"
PEER_GRAPHS, PEER_WIDTHS, PEER_THREADS, PEER_ROUNDS = "pl100k,pl1m", "16,64", "1,2", 3
NO_CSR = {"gat": "PyG's GATConv has no torch.sparse adj_t path (its attention needs the edge list)"}

def log(msg: str) -> None:
    print(msg, flush=True)


# -- optional dependencies ---------------------------------------------------------------------
def _importable(mod: str) -> bool:
    return importlib.util.find_spec(mod) is not None


def _probe(code: str, env=None, timeout=120):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode == 0:
        return True, r.stdout.strip()
    lines = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
    return False, (lines[-1] if lines else f"exit {r.returncode}")


def ensure_deps(args) -> dict:
    """Installs benchmarks/requirements.txt into this interpreter when PyG or matplotlib is missing."""
    req = os.path.join(HERE, "requirements.txt")
    status = {}
    missing = [m for m in ("torch_geometric", "matplotlib") if not _importable(m)]
    if missing and not args.no_install and not args.no_pyg:
        log(f"[deps] {', '.join(missing)} missing: installing {os.path.relpath(req, ROOT)} with "
            f"{sys.executable} -m pip (pass --no-install to skip; the suite runs without them)")
        try:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", req],
                               capture_output=True, text=True, timeout=args.install_timeout)
            if r.returncode != 0:
                tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
                status["install"] = f"pip install failed: {tail[0]}"
            else:
                status["install"] = "installed"
        except (subprocess.TimeoutExpired, OSError) as exc:
            status["install"] = f"pip install failed: {exc}"
        log(f"[deps] {status['install']}")
        importlib.invalidate_caches()
    if args.no_pyg:
        status["pyg"] = "unavailable: disabled with --no-pyg"
    elif not any(i.startswith("pyg") for i in args.impls.split(",")):  # importing PyG takes seconds
        status["pyg"] = "not run (not in --impls)"
    elif _importable("torch_geometric"):
        ok, out = _probe("import torch_geometric, torch_geometric.nn; print(torch_geometric.__version__)")
        status["pyg"] = out if ok else f"unavailable: import failed: {out}"
    else:
        status["pyg"] = "unavailable: torch_geometric is not installed" + (
            f" ({status['install']})" if "install" in status else " (--no-install)" if args.no_install else "")
    if _importable("matplotlib"):
        import matplotlib
        status["matplotlib"] = matplotlib.__version__
    else:
        status["matplotlib"] = "unavailable: no plots"
    return status


def dgl_status(args, impls) -> dict:
    """``{"python": interpreter or None, "status": a line for the report}`` of the DGL peer."""
    if "dgl" not in impls:
        return dict(python=None, status="DGL: not run (not in --impls)")
    import _peer_env
    env = _peer_env.dgl_python(install=not args.no_install, timeout=args.install_timeout * 3)
    if env["python"] is None:
        return dict(python=None, status=f"DGL: unavailable: {env['reason']}")
    v = env["versions"]
    return dict(python=env["python"], versions=v,
                status=f"DGL {v['dgl']} (torch {v['torch']}, numpy {v['numpy']}) in its own environment {env['source']}")


# -- graphs ------------------------------------------------------------------------------------
def prepare_graphs(names, workdir) -> dict:
    """Generates / loads each graph once and saves its int64 edge_index for the children."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import seastar as ss
    info = {}
    for name in names:
        t0 = time.perf_counter()
        label, n = GRAPHS[name]
        if n is None:
            ds = ss.datasets.load(name, build_graph=False)
            ei, N = ds.edge_index, ds.num_nodes
        else:
            ds = ss.datasets.power_law_graph(n, AVG_DEGREE, seed=0, build_graph=False)
            ei, N = ds.edge_index, ds.num_nodes
        path = os.path.join(workdir, f"{name}.pt")
        torch.save(ei.contiguous(), path)
        info[name] = dict(name=name, label=label, num_nodes=int(N), num_edges=int(ei.shape[1]), edge_index_path=path)
        log(f"[graph] {label}: {N} vertices, {ei.shape[1]} edges ({time.perf_counter() - t0:.1f} s)")
        del ds, ei
    return info


# -- estimates ---------------------------------------------------------------------------------
# Live E'-by-F float tensors at the peak of a training epoch of the unfused implementations
# (E' = E + N with self loops): messages x[src] and weighted messages in forward, their
# gradients in backward (GAT also keeps per-head scores, counted in the E'*H term). APPNP in
# PyG keeps what autograd saves for each of its K steps. Fused kernels materialise no E*F
# tensor. Rough on purpose: an upper bound to decide what to skip, not a prediction.
# PyG on a CSR adj_t and DGL run SpMM kernels (no E'*F tensor) except GAT, whose per-edge
# scores DGL keeps; torch.compile's PyG keeps about what eager PyG does.
EDGE_TENSORS = {("unfused", "gcn"): 4, ("unfused", "gat"): 5, ("unfused", "sage"): 3, ("unfused", "appnp"): 4,
                ("unfused", "gin"): 3,
                ("pyg", "gcn"): 4, ("pyg", "gat"): 5, ("pyg", "sage"): 3, ("pyg", "appnp"): 2 + 10, ("pyg", "gin"): 3}
ESTIMATE_AS = {"pyg_compile": "pyg"}


def estimate_bytes(layer, impl, N, E, F) -> int:
    impl = ESTIMATE_AS.get(impl, impl)
    Ep = E + N
    vertex = N * F * 4 * 16 + N * 16 * 4 * 4  # x, conv input/output, their grads, head
    if impl == "pyg":
        graph = Ep * 8 * 2 * 2 + Ep * 8  # edge_index (+ self-loop copy), weights
    elif impl in ("pyg_csr", "dgl"):
        graph = Ep * 8 * 2 * 3 + Ep * 4 * 2  # int64 COO / CSR / CSC, values, normalised copy
    else:
        graph = Ep * 4 * 6 * 2 + Ep * 12  # COO, CSC, CSR with edge ids; + self-loop copy; norm
        if impl == "unfused":
            graph += Ep * 8 * 2  # int64 src/dst the reference executor indexes with
    edge = EDGE_TENSORS.get((impl, layer), 0) * Ep * F * 4
    if layer == "appnp":
        vertex += 10 * N * F * 4 * 2  # every step's output (and its gradient) is kept for backward
    if layer == "gat" and impl not in ("fused", "pyg_csr"):
        edge += 8 * Ep * 4 * 4  # per-head scores, softmax, their gradients
    return int(vertex + graph + edge)


def mem_available_gb() -> float:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 8.0


# -- running children --------------------------------------------------------------------------
def run_child(cfg: dict, timeout: float, env_extra=None, retries: int = 2, python: str = None) -> dict:
    """Runs one child (``_spawn.spawn_json``; ``python``: another interpreter, the DGL
    environment's); retries after a minute when seastar's extension is being rebuilt (a shared
    tree: the .so can be momentarily missing or truncated)."""
    for attempt in range(retries + 1):
        res = spawn_json(os.path.join(HERE, "run.py"), cfg, cfg["threads"], timeout, python=python,
                         env_extra=env_extra)
        transient = res["status"] == "failed" and ("_C" in res.get("reason", "") or "seastar._C" in
                                                   res.get("stderr_tail", "")) and "ImportError" in res.get("reason", "")
        if not transient or attempt == retries:
            return res
        log(f"[retry] seastar._C could not be imported ({res['reason'][:120]}); retrying in 60 s")
        time.sleep(60)
    return res


def _train_key(r):
    return (r["layer"], r["width"], r["impl"], r["device"], r["threads"])


def plan_skip(cfg, graph, done, args, budget_bytes):
    """Reason to skip this training configuration, or None to run it."""
    N, E = graph["num_nodes"], graph["num_edges"]
    if args.max_ef and E * cfg["width"] > args.max_ef:
        return f"edges x width = {E * cfg['width']:.2g} is above --max-ef={args.max_ef:.2g}"
    est = estimate_bytes(cfg["layer"], cfg["impl"], N, E, cfg["width"])
    prev = [r for r in done if _train_key(r) == _train_key(cfg) and r["num_edges"] < E]
    prev.sort(key=lambda r: r["num_edges"])
    scaled = None
    if prev and prev[-1]["status"] == "ok":
        p = prev[-1]
        ratio = E / p["num_edges"]
        scaled = p["peak_mem_mb"] * 2**20 * ratio
        est_wall = p["import_s"] + (p["setup_s"] + p["measure_s"]) * ratio
        if est_wall > args.timeout:
            return (f"estimated {est_wall:.0f} s (the {p['graph_label']} run, {p['child_wall_s']:.0f} s, "
                    f"scaled by {ratio:.0f}x edges) exceeds the per-config timeout of {args.timeout:.0f} s")
    elif prev and prev[-1]["status"] in ("timeout", "skipped") and "memory" not in prev[-1].get("reason", ""):
        return f"the smaller {prev[-1]['graph_label']} already did not fit the time limit"
    need = max(est, scaled or 0)
    if need > budget_bytes:
        how = f"analytic {est / 2**30:.1f} GB" + (f", measured on the smaller graph and scaled {scaled / 2**30:.1f} GB"
                                                   if scaled else "")
        return (f"estimated peak memory {need / 2**30:.1f} GB ({how}) exceeds the budget of "
                f"{budget_bytes / 2**30:.1f} GB")
    return None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "results"), help="output folder")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: Cora, GCN + GAT, F=16, 2 repeats, fused vs unfused (+ PyG if importable)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (fused configurations the build cannot run there are recorded as unavailable; "
                         "latency and roofline runs are CPU-only)")
    ap.add_argument("--threads", default=None,
                    help=f"thread counts, each run by every implementation (default: {os.cpu_count()}; --peers: "
                         f"{PEER_THREADS})")
    ap.add_argument("--graphs", default=None,
                    help=f"subset of {','.join(GRAPHS)} (default: all; --peers: {PEER_GRAPHS})")
    ap.add_argument("--max-nodes", type=int, default=1_000_000, help="largest power-law graph to run")
    ap.add_argument("--widths", default=None, help=f"feature widths (default: 16,64,256; --peers: {PEER_WIDTHS})")
    ap.add_argument("--max-ef", type=float, default=None,
                    help="skip configurations with edges x width above this (e.g. 3.2e8: the 1M graph at F=16 only)")
    ap.add_argument("--layers", default=",".join(LAYERS), help=f"subset of {','.join(LAYERS)}")
    ap.add_argument("--impls", default=None,
                    help=f"subset of {','.join(IMPLS)} (default: all; --quick: {CLASSIC_IMPLS})")
    ap.add_argument("--repeats", type=int, default=3, help="timed epochs and forward passes per process (median)")
    ap.add_argument("--rounds", type=int, default=None,
                    help=f"interleaved rounds: every configuration once per round, one process each; the "
                         f"report gives the median over rounds and the spread (default 1; --peers: {PEER_ROUNDS})")
    ap.add_argument("--peers", action="store_true",
                    help="the peer comparison: the 100k and 1M graphs, every layer and implementation, F=16 and 64, "
                         "1 and 2 threads, 3 rounds, no latency or roofline runs, into benchmarks/results/peers "
                         "(each of these can be narrowed with its own flag)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed epochs besides the first (always untimed)")
    ap.add_argument("--timeout", type=float, default=300, help="per-configuration wall-time limit, seconds")
    ap.add_argument("--mem-budget-gb", type=float, default=None,
                    help="skip configurations estimated above this (default: 60%% of MemAvailable)")
    ap.add_argument("--latency-width", type=int, default=None, help="width of the first-call latency runs")
    ap.add_argument("--no-roofline", action="store_true")
    ap.add_argument("--roofline-only", action="store_true",
                    help="only the bandwidth runs of the aggregation programs (no latency, no training), "
                         "at every --threads count")
    ap.add_argument("--roofline-unfused-max", type=float, default=2e6 * 64,
                    help="largest E*F for which the unfused program forward is timed in the roofline")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--latency-layers", default=None, help="layers of the latency runs (default: --layers)")
    ap.add_argument("--roofline-impls", default="fused,unfused", help="implementations timed in the roofline")
    ap.add_argument("--no-pyg", action="store_true", help="do not run PyG even when it is installed")
    ap.add_argument("--no-install", action="store_true", help="never pip-install benchmarks/requirements.txt")
    ap.add_argument("--install-timeout", type=float, default=600)
    ap.add_argument("--append", action="store_true",
                    help="merge into --out/results.json: keep its records of configurations this run does not measure")
    ap.add_argument("--readme-table", action="store_true",
                    help="print the best-peer table of --out/results.json as README.md shows it")
    ap.add_argument("--report-only", action="store_true",
                    help="re-render results.md, the ratios and the plots from --out/results.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.graphs, args.layers, args.widths = "cora", "gcn,gat", "16"
        args.repeats, args.warmup = 2, 0
        args.latency_layers = args.latency_layers or "gcn"
        args.roofline_impls = "fused"
        args.impls = args.impls or CLASSIC_IMPLS
    if args.roofline_only:
        if args.no_roofline or args.peers:
            raise SystemExit("--roofline-only runs the roofline alone: not with --no-roofline or --peers")
        args.no_latency = True
    if args.peers:
        args.graphs = args.graphs or PEER_GRAPHS
        args.widths = args.widths or PEER_WIDTHS
        args.threads = args.threads or PEER_THREADS
        args.rounds = args.rounds or PEER_ROUNDS
        args.no_latency = args.no_roofline = True
        if args.out == os.path.join(ROOT, "results"):
            args.out = os.path.join(HERE, "results", "peers")
    args.graphs = args.graphs or ",".join(GRAPHS)
    args.widths = args.widths or "16,64,256"
    args.impls = args.impls or ",".join(IMPLS)
    args.rounds = args.rounds or 1
    args.thread_counts = [int(t) for t in (args.threads or str(os.cpu_count())).split(",") if t]
    args.threads = args.thread_counts[0]  # latency and roofline runs
    for i in args.impls.split(","):
        if i not in IMPLS:
            raise SystemExit(f"unknown implementation {i!r}; choose from {', '.join(IMPLS)}")
    for lay in args.layers.split(","):
        if lay not in LAYERS:
            raise SystemExit(f"unknown layer {lay!r}; choose from {', '.join(LAYERS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        import _child
        _child.main(args.child)
        return 0
    t_start = time.perf_counter()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    if args.readme_table:
        import _report
        with open(os.path.join(out, "results.json")) as fh:
            print(_report.readme_table(json.load(fh)), end="")
        return 0
    if args.report_only:
        return report_only(out)
    deps = ensure_deps(args)
    widths = [int(w) for w in args.widths.split(",") if w]
    layers = [lay for lay in args.layers.split(",") if lay]
    impls = [i for i in args.impls.split(",") if i]
    dgl_env = dgl_status(args, impls)
    deps["dgl"] = dgl_env["status"]
    deps["dgl_versions"] = dgl_env.get("versions")
    log(f"[deps] PyG: {deps['pyg']}; matplotlib: {deps['matplotlib']}")
    log(f"[deps] {deps['dgl']}")
    have_pyg = not deps["pyg"].startswith("unavailable")
    if not have_pyg:
        impls = [i for i in impls if not i.startswith("pyg")]
    if dgl_env["python"] is None:
        impls = [i for i in impls if i != "dgl"]
    names = [g for g in args.graphs.split(",") if g]
    for g in names:
        if g not in GRAPHS:
            raise SystemExit(f"unknown graph {g!r}; choose from {', '.join(GRAPHS)}")
    skipped_graphs = [g for g in names if GRAPHS[g][1] is not None and GRAPHS[g][1] > args.max_nodes]
    names = [g for g in names if g not in skipped_graphs]
    budget_gb = args.mem_budget_gb if args.mem_budget_gb else 0.6 * mem_available_gb()
    budget = budget_gb * 2**30

    workdir = tempfile.mkdtemp(prefix="seastar-bench-")
    try:
        graphs = prepare_graphs(names, workdir)
        order = sorted(names, key=lambda g: graphs[g]["num_edges"])
        base = dict(device=args.device, threads=args.threads, repeats=args.repeats, warmup=args.warmup)

        # 1. first-call latency: cold kernel cache (fresh folder), then warm (second process, same folder)
        latency = []
        if not args.no_latency and args.device == "cpu" and "fused" in impls:
            lw = args.latency_width or (64 if 64 in widths else widths[0])
            lg = "cora" if "cora" in graphs else order[0]
            for layer in (args.latency_layers.split(",") if args.latency_layers else layers):
                cache = tempfile.mkdtemp(prefix="seastar-cache-", dir=workdir)
                for phase in ("cold", "warm"):
                    cfg = dict(base, kind="latency", layer=layer, width=lw, **_graph_fields(graphs[lg]))
                    res = run_child(cfg, args.timeout, {"SEASTAR_CACHE_DIR": cache})
                    rec = dict(layer=layer, width=lw, graph=lg, phase=phase, **res)
                    latency.append(rec)
                    if res["status"] == "ok":
                        log(f"[latency] {layer:5s} F={lw} {phase}: first forward {res['first_forward_ms']:8.1f} ms, "
                            f"first backward {res['first_backward_ms']:8.1f} ms (steady {res['steady_forward_ms']:.1f}"
                            f" / {res['steady_backward_ms']:.1f} ms)")
                    else:
                        log(f"[latency] {layer} {phase}: {res['status']}: {res.get('reason')}")

        # 2. training epochs and forward passes: every configuration once per round, the
        # implementations of a row in rotating order, so that a slow spell of the (shared)
        # machine falls on all of them rather than on one
        train = [] if args.roofline_only else run_training(args, graphs, order, layers, widths, impls, base, budget,
                                                           dgl_env["python"])

        # 3. roofline of the aggregation programs
        roofline = []
        if not args.no_roofline and args.device == "cpu":
            for threads in (args.thread_counts if args.roofline_only else [args.threads]):
                roofline += run_roofline(args, graphs, order, widths, impls, budget, threads)

        results = dict(
            meta=_meta(args, deps, budget_gb, skipped_graphs, t_start, widths, layers, names),
            train=train, latency=latency, roofline=roofline)
        results["meta"]["wall_s"] = time.perf_counter() - t_start
        results["meta"]["load_average_at_end"] = _loadavg()
        if args.append:
            merge_previous(results, out)
        results["meta"]["plots"] = []
        write_report(results, out, with_plots=not deps["matplotlib"].startswith("unavailable"))
        plots = results["meta"]["plots"]
        log(f"[done] {time.perf_counter() - t_start:.0f} s; wrote {out}/results.json, results.md"
            + (f" and {len(plots)} plots" if plots else ""))
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_training(args, graphs, order, layers, widths, impls, base, budget, dgl_python):
    train, plans = [], {}
    for rnd in range(args.rounds):
        row_index = 0
        for gname in order:
            graph = graphs[gname]
            for threads in args.thread_counts:
                for layer in layers:
                    for width in widths:
                        k = (rnd + row_index) % len(impls)
                        row_index += 1
                        for impl in impls[k:] + impls[:k]:
                            rec = _train_one(args, graph, gname, layer, width, impl, threads, rnd, base, budget,
                                             dgl_python, train, plans)
                            train.append(rec)
    return train


def _train_one(args, graph, gname, layer, width, impl, threads, rnd, base, budget, dgl_python, done, plans):
    rec = dict(layer=layer, width=width, impl=impl, device=args.device, threads=threads, round=rnd, graph=gname,
               graph_label=graph["label"], num_nodes=graph["num_nodes"], num_edges=graph["num_edges"],
               est_peak_mb=estimate_bytes(layer, impl, graph["num_nodes"], graph["num_edges"], width) / 2**20)
    key = (gname,) + _train_key(rec)
    if impl == "pyg_csr" and layer in NO_CSR:
        rec.update(status="unavailable", reason=NO_CSR[layer])
        return rec
    if key not in plans:  # decided in the first round, from the smaller graphs' first-round runs
        plans[key] = plan_skip(rec, graph, [r for r in done if r["round"] == 0], args, budget)
    if plans[key]:
        rec.update(status="skipped", reason=plans[key])
        if rnd == 0:
            log(f"[train] {graph['label']:>15} {layer:5s} F={width:<3d} t={threads} {impl:11s}: skipped: {plans[key]}")
        return rec
    cfg = dict(base, kind="train", layer=layer, width=width, impl=impl, threads=threads, **_graph_fields(graph))
    rec["load_1min"] = (_loadavg() or [None])[0]
    rec.update(run_child(cfg, args.timeout, python=dgl_python if impl == "dgl" else None))
    if rec["status"] != "ok" and rnd == 0 and rec["status"] != "unavailable":
        plans[key] = f"failed in round 0: {rec['status']}: {rec.get('reason', '')}"[:300]
    _log_train(rec)
    return rec


def write_report(results, out, with_plots=True):
    import _report
    results["ratios"] = _report.ratios(results["train"])
    results["targets"] = _report.targets(results)
    if with_plots:
        results["meta"]["plots"] = _report.plots(results, out)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump(portable(results), fh, indent=1)
    with open(os.path.join(out, "results.md"), "w") as fh:
        fh.write(_report.markdown(results))


def merge_previous(results, out) -> None:
    """--append: keeps the records of the previous results.json in ``out`` that this run did
    not measure again (same graph, layer, width, threads and implementation), and its runs'
    metadata under ``meta["previous_runs"]``."""
    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        return
    with open(path) as fh:
        prev = json.load(fh)

    def key(r):
        return (r["graph"], r["layer"], r["width"], r.get("threads"), r["impl"])
    fresh = {key(r) for r in results["train"]}
    kept = [r for r in prev.get("train", []) if key(r) not in fresh]
    results["train"] = kept + results["train"]
    pm = dict(prev.get("meta", {}))
    runs = pm.pop("previous_runs", [])
    results["meta"]["previous_runs"] = runs + [{k: pm.get(k) for k in ("command", "date", "wall_s", "rounds",
                                                                       "load_average_at_start",
                                                                       "load_average_at_end")}]
    for k in ("latency", "roofline"):
        results[k] = results[k] or prev.get(k, [])


def report_only(out) -> int:
    """Re-renders a finished run. Records written before the peak came from VmHWM (their
    getrusage peak includes the parent's RSS, see _child.maxrss_mb) use the sampled RssAnon
    peak instead, and say so."""
    with open(os.path.join(out, "results.json")) as fh:
        results = json.load(fh)
    fixed = 0
    for r in results["train"]:
        if r.get("status") == "ok" and "peak_source" not in r and r.get("anon_peak_mb") is not None:
            r["peak_rusage_minus_import_mb"] = r["peak_mem_mb"]
            r["peak_mem_mb"] = r["anon_peak_mb"]
            r["peak_source"] = "sampled RssAnon (every 10 ms)"
            fixed += 1
    if fixed:
        results["meta"]["memory_note"] = (
            "peak memory = the peak of RssAnon sampled every 10 ms during training, less RssAnon after "
            "the imports: this run's getrusage peaks included the parent's RSS, which Linux carries into "
            "a child across fork + exec")
    write_report(results, out, with_plots=importlib.util.find_spec("matplotlib") is not None)
    log(f"[report] re-rendered {out}/results.md ({fixed} records use the sampled RssAnon peak)")
    return 0


def _graph_fields(graph):
    return dict(graph=graph["name"], num_nodes=graph["num_nodes"], num_edges=graph["num_edges"],
                edge_index_path=graph["edge_index_path"])


def _log_train(rec):
    head = (f"[train] r{rec.get('round', 0)} {rec['graph_label']:>15} {rec['layer']:5s} F={rec['width']:<3d} "
            f"t={rec.get('threads')} {rec['impl']:11s}:")
    if rec["status"] == "ok":
        log(f"{head} epoch {rec['epoch_ms']:9.1f} ms, forward {rec['forward_ms']:8.1f} ms, "
            f"peak {rec['peak_mem_mb']:7.0f} MB (anon {rec['anon_peak_mb']:.0f}, est. {rec['est_peak_mb']:.0f}), "
            f"child {rec['child_wall_s']:.0f} s")
    else:
        log(f"{head} {rec['status']}: {rec.get('reason')}")


def run_roofline(args, graphs, order, widths, impls, budget, threads):
    """One child per (graph, implementation): GCN aggregation (edges as given, and in destination
    order) and GAT program at every width."""
    rows = []
    candidates = [g for g in order if g in ("cora", "pl10k", "pl100k", "pl1m")] or order[:1]
    for gname in candidates:
        graph = graphs[gname]
        for impl in [i for i in args.roofline_impls.split(",") if i in impls]:
            N, E = graph["num_nodes"], graph["num_edges"]
            ws = []
            for w in widths:
                # fused: inputs + output only; unfused forward materialises ~3 E*F tensors
                need = (N * w * 4 * 4 + E * 16) if impl == "fused" else (3 * E * w * 4 + E * 16 * 4)
                if need <= budget and (impl == "fused" or E * w <= args.roofline_unfused_max):
                    ws.append(w)
                else:
                    rows.append(dict(graph=gname, graph_label=graph["label"], impl=impl, width=w, status="skipped",
                                     reason="estimated memory or time too large for the unfused forward"))
            if not ws:
                continue
            cfg = dict(kind="roofline", impl=impl, threads=threads, device="cpu", widths=ws,
                       programs=["gcn_agg", "gcn_agg_dst", "gat"], repeats=max(3, args.repeats), **_graph_fields(graph))
            dump = tempfile.mkdtemp(prefix="seastar-dump-", dir=os.path.dirname(graph["edge_index_path"]))
            res = run_child(cfg, args.timeout, {"SEASTAR_DUMP_DIR": dump})
            if res["status"] != "ok":
                rows.append(dict(graph=gname, graph_label=graph["label"], impl=impl, status=res["status"],
                                 reason=res.get("reason")))
                log(f"[roofline] {graph['label']} {impl}: {res['status']}: {res.get('reason')}")
                continue
            for r in res["rows"]:
                r.update(graph=gname, graph_label=graph["label"], impl=impl, status="ok", N=res["N"], E=res["E"],
                         index_bytes=res["index_bytes"], threads=threads)
                rows.append(r)
                log(f"[roofline] {graph['label']:>15} {r['program']:7s} F={r['width']:<3d} {impl:7s} {threads}T: "
                    f"{r['kernel_ms']:8.2f} ms, {r['gbps_executed']:5.1f} GB/s moved "
                    f"({r['gbps_useful']:5.1f} useful) vs copy {r['copy_gbps']:5.1f} GB/s = "
                    f"{100 * r['ratio_executed']:.0f}%")
    return rows


def _loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


def _meta(args, deps, budget_gb, skipped_graphs, t_start, widths, layers, names):
    import torch
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return dict(
        command=" ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]) if sys.argv else "",
        quick=args.quick, device=args.device, threads=args.thread_counts, rounds=args.rounds, impls=args.impls,
        cpu=cpu, cpu_count=os.cpu_count(), load_average_at_start=_loadavg(),
        torch=torch.__version__, python=platform.python_version(), deps=deps,
        pyg=deps["pyg"], dgl=deps["dgl"], repeats=args.repeats, warmup=args.warmup, timeout_s=args.timeout,
        mem_budget_gb=budget_gb, widths=widths, layers=layers, graphs=names,
        graphs_not_run={g: f"more than --max-nodes={args.max_nodes} vertices" for g in skipped_graphs},
        model="conv(F -> F) -> ReLU -> Linear(F, 16); cross-entropy over all vertices; Adam(lr=0.01)",
        hyper=dict(gat_heads=4, gat_channels="F/4", appnp_K=10, appnp_alpha=0.1, sage_aggr="mean",
                   gin="sum, eps=0, MLP Linear(F,F)-ReLU-Linear(F,F)"),
        date=time.strftime("%Y-%m-%d %H:%M:%S"))


if __name__ == "__main__":
    sys.exit(main())
