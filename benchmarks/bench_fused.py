"""Fused kernels vs the unfused plain-torch (gather / index_add) version of the same layer.

Each configuration runs in its own process (``_spawn.spawn_json``, as in every benchmark script)
so that peak resident memory is its own. Prints one line per configuration with the ratios, and
writes everything as JSON:

    python benchmarks/bench_fused.py --out results/bench_fused.json [--quick]

Measured per configuration: median time of a training step of the layer (forward + backward)
over repeats after warm-up; peak RSS of the process, and how much the steps raised it above
what the graph and the inputs already held (the memory the layer itself needs). The
baseline is the reference executor (``backend="reference"``), which is exactly the
gather/scatter formulation PyTorch Geometric uses internally.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _spawn import spawn_json  # noqa: E402  (the benchmarks' one way to run a child)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_one(cfg: dict) -> dict:
    import torch
    import seastar as ss

    torch.manual_seed(0)
    torch.set_num_threads(cfg["threads"])
    if cfg["graph"] in ("cora", "citeseer"):
        data = ss.datasets.load(cfg["graph"])
        graph = data.graph.add_self_loops()
    else:
        n, deg = cfg["nodes"], cfg["degree"]
        graph = ss.datasets.power_law_graph(n, deg, seed=0).graph
    N, E, F, H = graph.num_nodes, graph.num_edges, cfg["features"], cfg["heads"]

    @ss.vertex_program
    def gat(v):
        scores = [ss.leaky_relu(e.src.el + v.er, 0.2) for e in v.in_edges()]
        alpha = ss.softmax(scores)
        return sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))

    @ss.vertex_program
    def gcn(v):
        return sum(e.src.h * e.w for e in v.in_edges())

    if cfg["model"] == "gat":
        tensors = {"h": torch.randn(N, H, F), "el": torch.randn(N, H, 1), "er": torch.randn(N, H, 1)}
        prog = gat
    else:
        tensors = {"h": torch.randn(N, F), "w": torch.rand(E, 1)}
        prog = gcn
    for t in tensors.values():
        t.requires_grad_()

    def step():
        out = prog(graph, backend=cfg["backend"], **tensors)
        out.sum().backward()

    rss_before = _peak_rss_mb()  # graph and inputs exist; what the steps add is the layer's memory
    t0 = time.perf_counter()
    step()  # first call: tracing and (for fused) compiling or loading the cached kernels
    first_call = time.perf_counter() - t0
    times = []
    for _ in range(cfg["repeats"]):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return dict(cfg, N=N, E=E, step_ms=1e3 * statistics.median(times), first_call_ms=1e3 * first_call,
                peak_rss_mb=_peak_rss_mb(), step_peak_mb=_peak_rss_mb() - rss_before)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "bench_fused.json"))
    ap.add_argument("--quick", action="store_true", help="Cora only, few repeats (a smoke test)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))))
        return
    graphs = [("cora", {})]
    if not args.quick:
        graphs.append(("powerlaw", {"nodes": 100_000, "degree": 20}))
    configs = []
    for gname, extra in graphs:
        for model, feat, heads in (("gcn", 64, 1), ("gat", 8, 4)):
            for backend in ("fused", "reference"):
                configs.append(dict(graph=gname, model=model, features=feat, heads=heads, backend=backend,
                                    threads=args.threads, repeats=3 if args.quick else 5, **extra))
    results = []
    for cfg in configs:
        res = spawn_json(__file__, cfg, args.threads, timeout=3600)
        if res.get("status") in ("timeout", "killed", "failed"):
            print(f"FAILED {cfg}: {res['reason']}\n{res.get('stderr_tail', '')}", file=sys.stderr)
            sys.exit(1)
        results.append(res)
        print(f"{res['graph']:>9} {res['model']:>4} {res['backend']:>9}: step {res['step_ms']:9.2f} ms, "
              f"first call {res['first_call_ms']:8.1f} ms, peak RSS {res['peak_rss_mb']:8.1f} MB "
              f"(+{res['step_peak_mb']:.1f} MB in the step)", flush=True)
    ratios = []
    for f in (r for r in results if r["backend"] == "fused"):
        base = next(r for r in results if r["backend"] == "reference" and r["graph"] == f["graph"]
                    and r["model"] == f["model"])
        ratios.append(dict(graph=f["graph"], model=f["model"], speedup=base["step_ms"] / f["step_ms"],
                           memory_ratio=base["peak_rss_mb"] / f["peak_rss_mb"],
                           step_memory_ratio=base["step_peak_mb"] / max(f["step_peak_mb"], 1.0)))
        print(f"{f['graph']:>9} {f['model']:>4}: fused is {ratios[-1]['speedup']:.2f}x faster; peak RSS "
              f"{ratios[-1]['memory_ratio']:.2f}x lower, memory added by the training step "
              f"{ratios[-1]['step_memory_ratio']:.2f}x lower than unfused torch", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"results": results, "ratios": ratios}, fh, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
