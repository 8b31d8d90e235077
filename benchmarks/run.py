"""Seastar against PyTorch Geometric and unfused torch: time, memory, bandwidth, with plots.

    python benchmarks/run.py --out results/ [--quick] [--device cpu|cuda] [--threads N]
                             [--max-nodes N] [--widths 16,64,256] [--layers gcn,gat,sage,appnp]

Workloads: GCN, GAT (4 heads x F/4), GraphSAGE-mean and APPNP (K=10) on Cora, Citeseer and
R-MAT power-law graphs (``seastar.datasets.power_law_graph``, average in-degree 20) of 10k, 100k
and 1M vertices, at feature widths 16, 64 and 256 (random features; layer F -> F, then ReLU and
a linear head to 16 classes). Implementations, all in the same run with the same thread count:

* ``fused``: seastar's layer with its generated kernels (``backend="fused"``);
* ``unfused``: the same layer with ``backend="reference"``, the plain-torch gather / index_add
  formulation (what message passing in PyG does internally);
* ``pyg``: PyTorch Geometric's GCNConv / GATConv / SAGEConv / APPNP with matching settings.

Every configuration runs in its own subprocess (``_child.py`` documents what is measured).
Before a configuration runs, its peak memory is estimated (an analytic bytes model, and the
measurement on the next smaller graph scaled by the edge count) and so is its wall time (the
smaller graph's, scaled); it is skipped, with the reason recorded, when either exceeds
``--mem-budget-gb`` or ``--timeout``. Writes ``results.json``, ``results.md`` and PNG plots.

PyG and matplotlib come from ``benchmarks/requirements.txt``; they are installed into this
interpreter when missing (unless ``--no-install``), and the suite runs without them when that
fails (PyG recorded as unavailable, no plots).
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

GRAPHS = {  # name -> (label, number of vertices or None for a dataset)
    "cora": ("Cora", None),
    "citeseer": ("Citeseer", None),
    "pl10k": ("power law 10k", 10_000),
    "pl100k": ("power law 100k", 100_000),
    "pl1m": ("power law 1M", 1_000_000),
}
AVG_DEGREE = 20
LAYERS = ("gcn", "gat", "sage", "appnp")
IMPLS = ("fused", "unfused", "pyg")

DGL_KNOWN = ("PyPI's newest dgl (2.1.0) ships its graphbolt C++ library only for torch 2.0.0-2.2.1; "
             "import fails with FileNotFoundError: Cannot find DGL C++ graphbolt library at "
             ".../dgl/graphbolt/libgraphbolt_pytorch_2.11.0.so")


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
    status["dgl"] = dgl_status(args)
    return status


def dgl_status(args) -> str:
    if _importable("dgl"):
        ok, out = _probe("import dgl; print(dgl.__version__)")
        return f"importable {out} (not benchmarked)" if ok else f"not importable against this torch: {out}"
    if not args.try_dgl:
        return (f"DGL: not installable against torch 2.11: {DGL_KNOWN} (not re-checked in this run; "
                f"--try-dgl re-checks)")
    # Install into a throw-away folder (not this venv) and try to import it.
    target = tempfile.mkdtemp(prefix="seastar-dgl-")
    try:
        steps = [["--no-deps", "dgl", "torchdata==0.7.1"], ["pandas", "pydantic", "pyyaml", "scipy"]]
        for extra in steps:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", target] + extra,
                               capture_output=True, text=True, timeout=240)
            if r.returncode != 0:
                tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
                return f"DGL: not installable against torch 2.11: pip install failed: {tail[0]}"
        env = dict(os.environ, PYTHONPATH=target)
        ok, out = _probe("import dgl, dgl.nn; print(dgl.__version__)", env=env)
        if ok:
            return f"DGL {out} imports against this torch (installed in a scratch folder; not benchmarked)"
        import torch
        out = out.replace(target, "<scratch folder>")
        return f"DGL: not installable against torch {torch.__version__.split('+')[0]}: import fails: {out}"
    except (subprocess.TimeoutExpired, OSError) as exc:
        return f"DGL: not installable against torch 2.11: {exc}"
    finally:
        shutil.rmtree(target, ignore_errors=True)


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
EDGE_TENSORS = {("unfused", "gcn"): 4, ("unfused", "gat"): 5, ("unfused", "sage"): 3, ("unfused", "appnp"): 4,
                ("pyg", "gcn"): 4, ("pyg", "gat"): 5, ("pyg", "sage"): 3, ("pyg", "appnp"): 2 + 10}


def estimate_bytes(layer, impl, N, E, F) -> int:
    Ep = E + N
    vertex = N * F * 4 * 16 + N * 16 * 4 * 4  # x, conv input/output, their grads, head
    if impl == "pyg":
        graph = Ep * 8 * 2 * 2 + Ep * 8  # edge_index (+ self-loop copy), weights
    else:
        graph = Ep * 4 * 6 * 2 + Ep * 12  # COO, CSC, CSR with edge ids; + self-loop copy; norm
        if impl == "unfused":
            graph += Ep * 8 * 2  # int64 src/dst the reference executor indexes with
    edge = EDGE_TENSORS.get((impl, layer), 0) * Ep * F * 4
    if layer == "appnp":
        vertex += 10 * N * F * 4 * 2  # every step's output (and its gradient) is kept for backward
    if layer == "gat" and impl != "fused":
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
def run_child(cfg: dict, timeout: float, env_extra=None, retries: int = 2) -> dict:
    """Runs one child; retries after a minute when seastar's extension is being rebuilt (a
    shared tree: the .so can be momentarily missing or truncated)."""
    for attempt in range(retries + 1):
        res = _run_child_once(cfg, timeout, env_extra)
        transient = res["status"] == "failed" and ("_C" in res.get("reason", "") or "seastar._C" in
                                                   res.get("stderr_tail", "")) and "ImportError" in res.get("reason", "")
        if not transient or attempt == retries:
            return res
        log(f"[retry] seastar._C could not be imported ({res['reason'][:120]}); retrying in 60 s")
        time.sleep(60)
    return res


def _run_child_once(cfg: dict, timeout: float, env_extra=None) -> dict:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(cfg["threads"]), "MKL_NUM_THREADS": str(cfg["threads"])})
    env.update(env_extra or {})
    cmd = [sys.executable, os.path.join(HERE, "run.py"), "--child", json.dumps(cfg)]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return dict(status="timeout", reason=f"exceeded the per-config timeout of {timeout:.0f} s",
                    child_wall_s=time.perf_counter() - t0)
    lines = [ln for ln in r.stdout.strip().splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        err = (r.stderr or "").strip().splitlines()
        reason = err[-1] if err else f"exit code {r.returncode}"
        if r.returncode < 0 or r.returncode == 137:
            reason = f"killed (signal {-r.returncode if r.returncode < 0 else 9}; out of memory?)"
        return dict(status="failed", reason=reason[:400], stderr_tail="\n".join(err[-15:])[-3000:],
                    child_wall_s=time.perf_counter() - t0)
    return json.loads(lines[-1])


def _train_key(r):
    return (r["layer"], r["width"], r["impl"], r["device"])


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
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every implementation")
    ap.add_argument("--graphs", default="cora,citeseer,pl10k,pl100k,pl1m", help=f"subset of {','.join(GRAPHS)}")
    ap.add_argument("--max-nodes", type=int, default=1_000_000, help="largest power-law graph to run")
    ap.add_argument("--widths", default="16,64,256", help="feature widths")
    ap.add_argument("--max-ef", type=float, default=None,
                    help="skip configurations with edges x width above this (e.g. 3.2e8: the 1M graph at F=16 only)")
    ap.add_argument("--layers", default=",".join(LAYERS), help=f"subset of {','.join(LAYERS)}")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"subset of {','.join(IMPLS)}")
    ap.add_argument("--repeats", type=int, default=3, help="timed epochs and forward passes (median reported)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed epochs besides the first (always untimed)")
    ap.add_argument("--timeout", type=float, default=300, help="per-configuration wall-time limit, seconds")
    ap.add_argument("--mem-budget-gb", type=float, default=None,
                    help="skip configurations estimated above this (default: 60%% of MemAvailable)")
    ap.add_argument("--latency-width", type=int, default=None, help="width of the first-call latency runs")
    ap.add_argument("--no-roofline", action="store_true")
    ap.add_argument("--roofline-unfused-max", type=float, default=2e6 * 64,
                    help="largest E*F for which the unfused program forward is timed in the roofline")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--latency-layers", default=None, help="layers of the latency runs (default: --layers)")
    ap.add_argument("--roofline-impls", default="fused,unfused", help="implementations timed in the roofline")
    ap.add_argument("--no-pyg", action="store_true", help="do not run PyG even when it is installed")
    ap.add_argument("--no-install", action="store_true", help="never pip-install benchmarks/requirements.txt")
    ap.add_argument("--install-timeout", type=float, default=600)
    ap.add_argument("--try-dgl", action="store_true",
                    help="pip-install dgl into a scratch folder and try to import it (recorded, not benchmarked)")
    ap.add_argument("--report-only", action="store_true",
                    help="re-render results.md, the ratios and the plots from --out/results.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.graphs, args.layers, args.widths = "cora", "gcn,gat", "16"
        args.repeats, args.warmup = 2, 0
        args.latency_layers = args.latency_layers or "gcn"
        args.roofline_impls = "fused"
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
    if args.report_only:
        return report_only(out)
    deps = ensure_deps(args)
    log(f"[deps] PyG: {deps['pyg']}; matplotlib: {deps['matplotlib']}")
    log(f"[deps] {deps['dgl']}")
    have_pyg = not deps["pyg"].startswith("unavailable")

    widths = [int(w) for w in args.widths.split(",") if w]
    layers = [lay for lay in args.layers.split(",") if lay]
    impls = [i for i in args.impls.split(",") if i]
    if not have_pyg:
        impls = [i for i in impls if i != "pyg"]
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

        # 2. training epochs and forward passes
        train = []
        for gname in order:
            graph = graphs[gname]
            for layer in layers:
                for width in widths:
                    for impl in impls:
                        cfg = dict(base, kind="train", layer=layer, width=width, impl=impl, **_graph_fields(graph))
                        rec = dict(layer=layer, width=width, impl=impl, device=args.device, graph=gname,
                                   graph_label=graph["label"], num_nodes=graph["num_nodes"],
                                   num_edges=graph["num_edges"],
                                   est_peak_mb=estimate_bytes(layer, impl, graph["num_nodes"], graph["num_edges"],
                                                              width) / 2**20)
                        why = plan_skip(rec, graph, train, args, budget)
                        if why:
                            rec.update(status="skipped", reason=why)
                            log(f"[train] {graph['label']:>15} {layer:5s} F={width:<3d} {impl:7s}: skipped: {why}")
                        else:
                            rec.update(run_child(cfg, args.timeout))
                            _log_train(rec)
                        train.append(rec)

        # 3. roofline of the aggregation programs
        roofline = []
        if not args.no_roofline and args.device == "cpu":
            roofline = run_roofline(args, graphs, order, widths, impls, budget)

        results = dict(
            meta=_meta(args, deps, budget_gb, skipped_graphs, t_start, widths, layers, names),
            train=train, latency=latency, roofline=roofline)
        results["meta"]["wall_s"] = time.perf_counter() - t_start
        results["meta"]["plots"] = []
        write_report(results, out, with_plots=not deps["matplotlib"].startswith("unavailable"))
        plots = results["meta"]["plots"]
        log(f"[done] {time.perf_counter() - t_start:.0f} s; wrote {out}/results.json, results.md"
            + (f" and {len(plots)} plots" if plots else ""))
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def write_report(results, out, with_plots=True):
    import _report
    results["ratios"] = _report.ratios(results["train"])
    results["targets"] = _report.targets(results)
    if with_plots:
        results["meta"]["plots"] = _report.plots(results, out)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    with open(os.path.join(out, "results.md"), "w") as fh:
        fh.write(_report.markdown(results))


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
    head = f"[train] {rec['graph_label']:>15} {rec['layer']:5s} F={rec['width']:<3d} {rec['impl']:7s}:"
    if rec["status"] == "ok":
        log(f"{head} epoch {rec['epoch_ms']:9.1f} ms, forward {rec['forward_ms']:8.1f} ms, "
            f"peak {rec['peak_mem_mb']:7.0f} MB (anon {rec['anon_peak_mb']:.0f}, est. {rec['est_peak_mb']:.0f}), "
            f"child {rec['child_wall_s']:.0f} s")
    else:
        log(f"{head} {rec['status']}: {rec.get('reason')}")


def run_roofline(args, graphs, order, widths, impls, budget):
    """One child per (graph, implementation): GCN aggregation and GAT program at every width."""
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
            cfg = dict(kind="roofline", impl=impl, threads=args.threads, device="cpu", widths=ws,
                       programs=["gcn_agg", "gat"], repeats=max(3, args.repeats), **_graph_fields(graph))
            dump = tempfile.mkdtemp(prefix="seastar-dump-", dir=os.path.dirname(graph["edge_index_path"]))
            res = run_child(cfg, args.timeout, {"SEASTAR_DUMP_DIR": dump})
            if res["status"] != "ok":
                rows.append(dict(graph=gname, graph_label=graph["label"], impl=impl, status=res["status"],
                                 reason=res.get("reason")))
                log(f"[roofline] {graph['label']} {impl}: {res['status']}: {res.get('reason')}")
                continue
            for r in res["rows"]:
                r.update(graph=gname, graph_label=graph["label"], impl=impl, status="ok", N=res["N"], E=res["E"],
                         index_bytes=res["index_bytes"])
                rows.append(r)
                log(f"[roofline] {graph['label']:>15} {r['program']:7s} F={r['width']:<3d} {impl:7s}: "
                    f"{r['kernel_ms']:8.2f} ms, {r['gbps_executed']:5.1f} GB/s moved "
                    f"({r['gbps_useful']:5.1f} useful) vs copy {r['copy_gbps']:5.1f} GB/s = "
                    f"{100 * r['ratio_executed']:.0f}%")
    return rows


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
        quick=args.quick, device=args.device, threads=args.threads, cpu=cpu, cpu_count=os.cpu_count(),
        torch=torch.__version__, python=platform.python_version(), deps=deps,
        pyg=deps["pyg"], dgl=deps["dgl"], repeats=args.repeats, warmup=args.warmup, timeout_s=args.timeout,
        mem_budget_gb=budget_gb, widths=widths, layers=layers, graphs=names,
        graphs_not_run={g: f"more than --max-nodes={args.max_nodes} vertices" for g in skipped_graphs},
        model="conv(F -> F) -> ReLU -> Linear(F, 16); cross-entropy over all vertices; Adam(lr=0.01)",
        hyper=dict(gat_heads=4, gat_channels="F/4", appnp_K=10, appnp_alpha=0.1, sage_aggr="mean"),
        date=time.strftime("%Y-%m-%d %H:%M:%S"))


if __name__ == "__main__":
    sys.exit(main())
