#!/usr/bin/env python
"""1 vs 2 threads, on an idle machine and with competing CPU-bound processes: a training epoch
(the peer suite's model for ``--layer``: the layer, ReLU, a Linear head, cross-entropy over every
vertex, Adam) and the fused GCN propagation alone (forward + backward).

    .venv/bin/python benchmarks/bench_threads.py --num-nodes 100000 --avg-degree 20 --width 64 \\
        --layer gcn --busy 0,1 --out benchmarks/results/threads.json

For each number of busy processes (``--busy``: each a Python loop that spins on one core, started
before and stopped after that block of measurements) the thread counts are interleaved over
``--repeats`` rounds in one process, each count above 1 twice: with seastar's thread governor
(python/seastar/_thread_governor.py) and without it; the JSON keeps every round and the report
gives the median, the spread (min-max) and the speed-up of 2 threads over 1. torch's OpenMP
threads spin only briefly (``GOMP_SPINCOUNT=1000``, set here before torch loads, as the example
scripts do; see python/seastar/_openmp_wait.py) unless ``--torch-first``, which shows what a
script that leaves libgomp's default spin gets.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

SPIN = "import time\nwhile True:\n    pass\n"


def measure(args) -> dict:
    if not args.torch_first and "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "1000")  # before torch loads libgomp
    import seastar as ss
    import torch
    import torch.nn.functional as F
    from seastar.nn.gcn_conv import symmetric_sum
    from _child import NUM_CLASSES, build_model

    data = ss.datasets.synthetic_node_classification(args.num_nodes, args.avg_degree, NUM_CLASSES, args.width, seed=0)
    g, x, y = data.graph, data.x, data.y
    model = build_model(args.layer, "fused", args.width)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    h = torch.randn(g.num_nodes, args.width, requires_grad=True)
    d = torch.rand(g.num_nodes, 1)

    def epoch():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(g, x), y).backward()
        opt.step()

    def propagation():
        out = symmetric_sum(g, h=h, d=d)
        out.backward(torch.ones_like(out))

    def use(threads, governor):
        ss.set_thread_governor(governor)
        torch.set_num_threads(threads)

    runs = {"epoch": epoch, "propagation": propagation}
    setups = [(t, g) for t in args.threads for g in ((True, False) if t > 1 else (True,))]
    rows, pool_stats, governor_stats = [], {}, {}
    for busy in args.busy:
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
        try:
            for setup in setups:  # warm-up: kernels compiled and loaded, pools started, load measured
                use(*setup)
                for f in runs.values():
                    f()
            times = {(name, setup): [] for name in runs for setup in setups}
            threads_used = {key: [] for key in times}
            for _ in range(args.repeats):
                for name, f in runs.items():
                    for setup in setups:
                        use(*setup)
                        t0 = time.perf_counter()
                        f()
                        times[(name, setup)].append(time.perf_counter() - t0)
                        threads_used[(name, setup)].append(torch.get_num_threads())
        finally:
            for p in spinners:
                p.kill()
                p.wait()
        for (name, (t, governor)), ts in times.items():
            rows.append({"busy": busy, "what": name, "threads": t, "governor": governor, "seconds": ts,
                         "threads_after": threads_used[(name, (t, governor))]})
        pool_stats[str(busy)] = ss.kernel_pool_stats()  # cumulative, after this block
        governor_stats[str(busy)] = ss.thread_governor_stats()
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return {"config": config, "load_after": os.getloadavg(), "rows": rows, "kernel_pool_stats": pool_stats,
            "thread_governor_stats": governor_stats}


def report(result: dict) -> str:
    lines = ["| busy processes | measured | 1 thread (median, min-max) | 2 threads | speed-up 2 vs 1 "
             "| 2 threads, governor off | speed-up 2 vs 1, governor off |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    by = {(r["busy"], r["what"], r["threads"], r.get("governor", True)): r["seconds"] for r in result["rows"]}
    fmt = lambda ts: f"{statistics.median(ts) * 1e3:.0f} ms ({min(ts) * 1e3:.0f}-{max(ts) * 1e3:.0f})" if ts else "-"
    ratio = lambda a, b: f"{statistics.median(a) / statistics.median(b):.2f}x" if a and b else "-"
    for busy in result["config"]["busy"]:
        for what in ("epoch", "propagation"):
            one, two, off = (by.get((busy, what, t, g)) for t, g in ((1, True), (2, True), (2, False)))
            if not one or not two:
                continue
            lines.append(f"| {busy} | {what} | {fmt(one)} | {fmt(two)} | {ratio(one, two)} | {fmt(off)} | "
                         f"{ratio(one, off)} |")
    for busy, st in result.get("kernel_pool_stats", {}).items():
        lines.append(f"\nkernel pool after the block with {busy} busy: {st['pooled']} jobs offered to helpers, "
                     f"{st['lost']} of them lost, {st['benched']} run on the caller alone (cumulative)")
    for busy, st in result.get("thread_governor_stats", {}).items():
        lines.append(f"\nthread governor after the block with {busy} busy: other processes' load "
                     f"{st['other_cores']:.2f} cores, {st['samples']} samples, torch's count lowered "
                     f"{st['lowered']} times, restored {st['restored']} (cumulative)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-nodes", type=int, default=100_000)
    ap.add_argument("--avg-degree", type=float, default=20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layer", choices=("gcn", "gat", "sage", "gin", "appnp"), default="gcn")
    ap.add_argument("--busy", type=lambda s: [int(v) for v in s.split(",")], default=[0, 1])
    ap.add_argument("--threads", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--torch-first", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.repeats < 1 or args.num_nodes < 2:
        ap.error("--repeats must be >= 1 and --num-nodes >= 2")
    result = measure(args)
    text = report(result)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
