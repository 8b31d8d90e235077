"""The CUDA traversals' hub degree, swept: seastar's epoch at each SEASTAR_CUDA_HUB_DEGREE.

    python benchmarks/sweep_hub_degree.py --out DIR [--degrees 0,128,512,2048] [--graph pl1m]
                                          [--width 64] [--layers gcn,gat,sage] [--budget 120]
                                          [--device cuda|cpu] [--smoke] [--merge-into bench.json]

A centre with at least the hub degree of edges is taken by a whole block whose groups split its
edges (docs/ARCHITECTURE.md, Scheduling); 0 turns that off. The degree is read when a program's
kernels are emitted, so every setting runs in a process of its own: ``bench_gpu.py`` with
``--impls fused`` on one graph and width, its model, timing (CUDA events, median of its rounds,
spread) and peak memory. The settings run in two rounds, the second in reverse order, each
setting's time the better of its rounds, so a drift of the machine does not favour the first
setting. The report gives each layer's time per setting and its ratio to the best setting;
the default (``launch::kDefaultHubDegree``) is chosen from these results. ``--merge-into`` adds
the sweep to an existing ``bench.json`` (the GPU check returns few files). ``--smoke``: the CI
check on the CPU, where the setting changes nothing (the plumbing only).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_setting(degree, args, budget, out_dir) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "bench_gpu.py"), "--out", out_dir, "--graphs", args.graph,
           "--widths", str(args.width), "--layers", args.layers, "--impls", "fused", "--no-profile",
           "--budget", f"{budget:.0f}", "--device", args.device]
    if args.smoke:
        cmd += ["--smoke"]
    env = dict(os.environ, SEASTAR_CUDA_HUB_DEGREE=str(degree))
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=budget + 120)
    path = os.path.join(out_dir, "bench.json")
    if r.returncode != 0 or not os.path.exists(path):
        return dict(status="failed", reason=(r.stderr or r.stdout)[-1500:], wall_s=time.time() - t0)
    res = json.load(open(path))
    layers = {}
    for grp in res.get("groups", []):
        for rec in grp.get("layers", []):
            fused = rec.get("impls", {}).get("fused", {})
            if fused.get("status") == "ok":
                layers[rec["layer"]] = dict(epoch_ms=fused["epoch_ms"], spread=fused.get("spread"),
                                            peak_mem_mb=fused.get("peak_mem_mb"))
    return dict(status="ok", layers=layers, wall_s=time.time() - t0)


def summarise(degrees, rounds, layers) -> dict:
    table = {}
    for layer in layers:
        best_of = {}
        for d in degrees:
            times = [r[d]["layers"][layer]["epoch_ms"] for r in rounds
                     if r.get(d, {}).get("status") == "ok" and layer in r[d]["layers"]]
            if times:
                best_of[d] = min(times)
        if not best_of:
            continue
        best = min(best_of.values())
        table[layer] = {str(d): dict(epoch_ms=t, over_best=t / best) for d, t in best_of.items()}
        table[layer]["best_degree"] = min(best_of, key=best_of.get)
    return table


def write(out_dir, result) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "hub_sweep.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"## Hub degree sweep: {result['graph']}, F={result['width']}, {result['device']}", "",
             "Epoch (ms) of seastar at each SEASTAR_CUDA_HUB_DEGREE (0: no hub path), the better of two rounds; "
             "in brackets, over the best setting.", "",
             "| layer | " + " | ".join(str(d) for d in result["degrees"]) + " | best |",
             "| --- |" + " --- |" * (len(result["degrees"]) + 1)]
    for layer, row in result["table"].items():
        cells = [f"{row[str(d)]['epoch_ms']:.2f} ({row[str(d)]['over_best']:.2f}x)" if str(d) in row else "n/a"
                 for d in result["degrees"]]
        lines.append(f"| {layer} | " + " | ".join(cells) + f" | {row['best_degree']} |")
    with open(os.path.join(out_dir, "hub_sweep.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--degrees", default="0,128,512,2048")
    ap.add_argument("--graph", default=None)
    ap.add_argument("--width", type=int, default=None)
    ap.add_argument("--layers", default="gcn,gat,sage")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for the whole sweep")
    ap.add_argument("--device", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--merge-into", default=None, help="a bench.json to add the sweep to, as 'hub_sweep'")
    args = ap.parse_args()
    try:
        degrees = [int(d) for d in args.degrees.split(",")]
    except ValueError:
        sys.exit(f"sweep_hub_degree.py: --degrees must be integers, got {args.degrees!r}")
    if any(d < 0 for d in degrees) or not degrees:
        sys.exit("sweep_hub_degree.py: --degrees must be non-negative integers")
    if args.budget <= 0:
        sys.exit("sweep_hub_degree.py: --budget must be positive")
    if args.device is None:
        import torch
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.graph = args.graph or ("pl2k" if args.smoke else "pl1m")
    args.width = args.width or (16 if args.smoke else 64)
    t_start = time.time()
    rounds = []
    work = tempfile.mkdtemp(prefix="seastar-hub-sweep-")
    for rnd, order in enumerate((degrees, degrees[::-1])):
        rec = {}
        for i, d in enumerate(order):
            left = args.budget - (time.time() - t_start)
            runs_left = len(order) - i + (len(degrees) if rnd == 0 else 0)
            if left < 15 or (rnd == 1 and left / runs_left < 15):
                rec[d] = dict(status="skipped", reason="out of budget")
                continue
            rec[d] = run_setting(d, args, max(15.0, left / runs_left), os.path.join(work, f"r{rnd}_d{d}"))
            print(f"[hub sweep] round {rnd + 1}, degree {d}: {rec[d]['status']} "
                  f"{ {k: round(v['epoch_ms'], 2) for k, v in rec[d].get('layers', {}).items()} }", flush=True)
        rounds.append(rec)
    layers = args.layers.split(",")
    result = dict(graph=args.graph, width=args.width, device=args.device, degrees=degrees,
                  rounds=[{str(d): r for d, r in rec.items()} for rec in rounds],
                  table=summarise(degrees, rounds, layers), wall_s=time.time() - t_start)
    write(args.out, result)
    if args.merge_into and os.path.exists(args.merge_into):
        with open(args.merge_into) as f:
            bench = json.load(f)
        bench["hub_sweep"] = result
        with open(args.merge_into, "w") as f:
            json.dump(bench, f, indent=1)
    print(f"wrote {os.path.join(args.out, 'hub_sweep.json')} and hub_sweep.md ({result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
