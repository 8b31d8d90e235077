"""The CUDA thread mapping's parameters, swept: seastar's epoch under each launch setting.

    python benchmarks/sweep_launch.py --out DIR [--settings hub=0,group=16+vector=4,block=512]
                                      [--graph pl1m] [--width 64] [--layers gcn,gat,sage]
                                      [--budget 120] [--device cuda|cpu] [--smoke]
                                      [--merge-into bench.json]

The parameters (codegen/launch_layout.h, MappingSettings and the hub path; docs/ARCHITECTURE.md,
Thread mapping and Scheduling), each an environment variable the runtime reads when it emits a
program's kernels:

    hub        SEASTAR_CUDA_HUB_DEGREE        a centre of at least this many edges takes a whole
                                              block (0: no hub path)
    group      SEASTAR_CUDA_GROUP_THREADS     the most threads per item below a block's width
    block      SEASTAR_CUDA_BLOCK_THREADS     threads per block of groups narrower than a block
    hub_block  SEASTAR_CUDA_HUB_BLOCK_THREADS threads per block of a traversal with the hub path
    vector     SEASTAR_CUDA_VECTOR_ELEMS      consecutive elements a lane reads and writes at
                                              once (1, 2 or 4: 4- to 16-byte accesses)

A setting is ``name=value`` or several joined by ``+`` (``group=16+block=512``); ``default``
(every variable unset) is always swept first, so each setting changes one thing from the
defaults unless it says more. Every setting runs in a process of its own: ``bench_gpu.py`` with
``--impls fused`` on one graph and width, its model, timing (CUDA events, median of its rounds,
spread) and peak memory. The settings run in two rounds, the second in reverse order, each
setting's time the better of its rounds, so a drift of the machine does not favour the first
setting; a second round that does not fit the budget is skipped. The report gives each layer's
time per setting and its ratio to the best setting; the defaults are chosen from these results.
``--merge-into`` adds the sweep to an existing ``bench.json`` as ``launch_sweep`` (the GPU check
returns few files). ``--smoke``: the CI check on the CPU, where the settings change nothing (the
plumbing only).
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

VARIABLES = {"hub": "SEASTAR_CUDA_HUB_DEGREE", "group": "SEASTAR_CUDA_GROUP_THREADS",
             "block": "SEASTAR_CUDA_BLOCK_THREADS", "hub_block": "SEASTAR_CUDA_HUB_BLOCK_THREADS",
             "vector": "SEASTAR_CUDA_VECTOR_ELEMS"}
DEFAULT_SETTINGS = ("hub=0,hub=2048,group=16,group=8,block=128,block=512,hub_block=256,hub_block=1024,"
                    "vector=2,group=16+vector=4")


def parse_settings(text: str) -> dict:
    """'hub=0,group=16+block=512' -> {'default': {}, 'hub=0': {VAR: '0'}, ...}; SystemExit naming
    what is wrong otherwise. The values' ranges are checked by the runtime, which refuses a bad
    one by name in the setting's own process."""
    settings = {"default": {}}
    for item in filter(None, (s.strip() for s in text.split(","))):
        if item == "default":
            continue
        env = {}
        for part in item.split("+"):
            name, eq, value = part.partition("=")
            if not eq or name not in VARIABLES:
                sys.exit(f"sweep_launch.py: a setting is name=value with a name from {sorted(VARIABLES)}, "
                         f"got {part!r}")
            if not value.isdigit():
                sys.exit(f"sweep_launch.py: {name} must be a non-negative integer, got {value!r}")
            env[VARIABLES[name]] = value
        settings[item] = env
    return settings


def run_setting(env_vars, args, budget, out_dir) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "bench_gpu.py"), "--out", out_dir, "--graphs", args.graph,
           "--widths", str(args.width), "--layers", args.layers, "--impls", "fused", "--no-profile",
           "--budget", f"{budget:.0f}", "--device", args.device]
    if args.smoke:
        cmd += ["--smoke"]
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES.values()}
    env.update(env_vars)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=budget + 120)
    path = os.path.join(out_dir, "bench.json")
    if r.returncode != 0 or not os.path.exists(path):
        return dict(status="failed", reason=(r.stderr or r.stdout)[-1500:], wall_s=time.time() - t0)
    res = json.load(open(path))
    layers, failures = {}, []
    for grp in res.get("groups", []):
        for rec in grp.get("layers", []):
            fused = rec.get("impls", {}).get("fused", {})
            if fused.get("status") == "ok":
                layers[rec["layer"]] = dict(epoch_ms=fused["epoch_ms"], spread=fused.get("spread"),
                                            peak_mem_mb=fused.get("peak_mem_mb"))
            elif fused.get("status") == "failed":
                failures.append(f"{rec['layer']}: {fused.get('reason')}")
        if grp.get("status") not in (None, "ok"):
            failures.append(f"{grp.get('status')}: {grp.get('reason')}")
    if failures and not layers:
        return dict(status="failed", reason="; ".join(failures)[-1500:], wall_s=time.time() - t0)
    return dict(status="ok", layers=layers, failures=failures, wall_s=time.time() - t0)


def summarise(names, rounds, layers) -> dict:
    """Per layer: each setting's better round, its ratio to the best setting, the best's name."""
    table = {}
    for layer in layers:
        best_of = {}
        for s in names:
            times = [r[s]["layers"][layer]["epoch_ms"] for r in rounds
                     if r.get(s, {}).get("status") == "ok" and layer in r[s]["layers"]]
            if times:
                best_of[s] = min(times)
        if not best_of:
            continue
        best = min(best_of.values())
        table[layer] = {s: dict(epoch_ms=t, over_best=t / best) for s, t in best_of.items()}
        table[layer]["best"] = min(best_of, key=best_of.get)
    return table


def write(out_dir, result) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "launch_sweep.json"), "w") as f:
        json.dump(result, f, indent=1)
    names = list(result["settings"])
    lines = [f"## Launch settings swept: {result['graph']}, F={result['width']}, {result['device']}", "",
             "Epoch (ms) of seastar under each setting (" +
             "; ".join(f"{k}: {v}" for k, v in VARIABLES.items()) +
             "), the better of its rounds; in brackets, over the best setting.", "",
             "| layer | " + " | ".join(names) + " | best |",
             "| --- |" + " --- |" * (len(names) + 1)]
    for layer, row in result["table"].items():
        cells = [f"{row[s]['epoch_ms']:.2f} ({row[s]['over_best']:.2f}x)" if s in row else "n/a" for s in names]
        lines.append(f"| {layer} | " + " | ".join(cells) + f" | {row['best']} |")
    failed = [f"{s} (round {i + 1}): {rec['reason'][-300:]}" for i, rnd in enumerate(result["rounds"])
              for s, rec in rnd.items() if rec.get("status") == "failed"]
    if failed:
        lines += ["", "Failed:", *(f"- {f}" for f in failed)]
    with open(os.path.join(out_dir, "launch_sweep.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--settings", default=DEFAULT_SETTINGS)
    ap.add_argument("--graph", default=None)
    ap.add_argument("--width", type=int, default=None)
    ap.add_argument("--layers", default="gcn,gat,sage")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for the whole sweep")
    ap.add_argument("--device", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--merge-into", default=None, help="a bench.json to add the sweep to, as 'launch_sweep'")
    args = ap.parse_args()
    settings = parse_settings(args.settings)
    if args.budget <= 0:
        sys.exit("sweep_launch.py: --budget must be positive")
    if args.device is None:
        import torch
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.graph = args.graph or ("pl2k" if args.smoke else "pl1m")
    args.width = args.width or (16 if args.smoke else 64)
    names = list(settings)
    t_start = time.time()
    rounds = []
    work = tempfile.mkdtemp(prefix="seastar-launch-sweep-")
    for rnd, order in enumerate((names, names[::-1])):
        rec = {}
        for i, s in enumerate(order):
            left = args.budget - (time.time() - t_start)
            runs_left = len(order) - i + (len(names) if rnd == 0 else 0)
            # the first round tries every setting while 15 s are left; the second runs only
            # while each of its runs still gets 15 s
            if left < 15 or (rnd == 1 and left / runs_left < 15):
                rec[s] = dict(status="skipped", reason="out of budget")
                continue
            share = left / runs_left
            if share < 15:  # no room for a second round: this one takes what is left
                share = left / (len(order) - i)
            rec[s] = run_setting(settings[s], args, max(15.0, share), os.path.join(work, f"r{rnd}_{len(rec)}"))
            print(f"[launch sweep] round {rnd + 1}, {s}: {rec[s]['status']} "
                  f"{ {k: round(v['epoch_ms'], 2) for k, v in rec[s].get('layers', {}).items()} }", flush=True)
        rounds.append(rec)
    result = dict(graph=args.graph, width=args.width, device=args.device, variables=VARIABLES,
                  settings=settings, rounds=rounds, table=summarise(names, rounds, args.layers.split(",")),
                  wall_s=time.time() - t_start)
    write(args.out, result)
    if args.merge_into and os.path.exists(args.merge_into):
        with open(args.merge_into) as f:
            bench = json.load(f)
        bench["launch_sweep"] = result
        with open(args.merge_into, "w") as f:
            json.dump(bench, f, indent=1)
    print(f"wrote {os.path.join(args.out, 'launch_sweep.json')} and launch_sweep.md ({result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
