"""The launch settings the device sweeps, modelled first: load imbalance, occupancy, registers and spills per setting.

    python benchmarks/model_launch_settings.py --out benchmarks/results/gpu_model
                                               [--settings hub=0,group=16,...] [--graph pl1m]
                                               [--width 64] [--smoke]

For each setting of ``sweep_launch.py`` (the same grammar and variables; ``default`` first),
``gpu_model.py`` runs in a process of its own with the setting's environment, since the runtime
reads the settings when it emits a program: the benchmark's layers at one width on one graph
(``--smoke``: the test zoo on a 2,000-vertex graph). For every traversal kernel, the table gives
the busiest worker's work over the mean (warps, or blocks for block-wide groups), the threads per
item and per block the code generator chose, the blocks resident on the modelled H200 (registers
and shared memory permitting) and NVRTC's registers and spill bytes. It tells which settings a
GPU run should time and which would spill; it cannot tell which is fastest, since memory
efficiency per lane is not modelled: the device sweep decides. Writes ``launch_settings.json``
and ``launch_settings.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from sweep_launch import DEFAULT_SETTINGS, VARIABLES, parse_settings  # noqa: E402


def model_setting(env_vars: dict, args, out_dir: str) -> dict:
    """The traversal rows of gpu_model.py under one setting, keyed by kernel; or the failure."""
    cmd = [sys.executable, os.path.join(HERE, "gpu_model.py"), "--out", out_dir, "--graphs", args.graph,
           "--widths", str(args.width)]
    if args.smoke:
        cmd.append("--smoke")
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES.values()}
    env.update(env_vars)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    path = os.path.join(out_dir, "gpu_model.json")
    if r.returncode != 0 or not os.path.exists(path):
        return dict(status="failed", reason=(r.stderr or r.stdout)[-1500:])
    with open(path) as fh:
        res = json.load(fh)
    rows = {}
    for row in res["graphs"][args.graph]:
        if not row["what"].startswith("traversal"):
            continue
        key = f"{row['model']}: {row['program']} {row['direction'][:3]} {row['kernel']}"
        rows[key] = {k: row[k] for k in ("group_threads", "block_threads", "elems_per_thread", "resident_blocks",
                                         "worker", "busiest_worker_over_mean", "busiest_block_over_mean",
                                         "registers", "spill_store_bytes", "spill_load_bytes")}
    return dict(status="ok", kernels=rows, graph_info=res["graph_info"][args.graph], nvrtc=res.get("nvrtc"))


def summary(rec: dict) -> dict:
    """The worst kernel of a setting: its largest imbalance, registers and spill bytes."""
    rows = list(rec["kernels"].values())
    regs = [r["registers"] for r in rows if r["registers"] is not None]
    return dict(max_worker_over_mean=max(r["busiest_worker_over_mean"] for r in rows),
                max_registers=max(regs) if regs else None,
                spilling_kernels=sum(1 for r in rows if (r["spill_store_bytes"] or 0) > 0))


def write_md(path: str, result: dict) -> None:
    names = [s for s in result["settings"] if result["models"][s]["status"] == "ok"]
    info = result["graph_info"]
    lines = ["# Launch settings, modelled without a GPU", "",
             f"`{result['command']}`: {result['graph']} ({info.get('num_nodes')} vertices, {info.get('num_edges')} "
             f"edges), F={result['width']}, the modelled H200, NVRTC {result['nvrtc']} for sm_90. The settings are "
             "those of `benchmarks/sweep_launch.py` (" + "; ".join(f"{k}: {v}" for k, v in VARIABLES.items()) + ").",
             "",
             "Each cell: the busiest worker's work over the mean, then threads per item / per block, resident "
             "blocks, registers and spill stores (B). The model says which settings would spill or lose "
             "occupancy and how the work spreads; it does not model memory efficiency per lane, so the device "
             "sweep chooses the defaults.", "",
             "| setting | worst worker/mean | most registers | kernels that spill |", "| --- | --- | --- | --- |"]
    for s in names:
        sm = result["models"][s]["summary"]
        lines.append(f"| {s} | {sm['max_worker_over_mean']:.2f} | {sm['max_registers']} | {sm['spilling_kernels']} |")
    lines += ["", "| kernel | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    kernels = result["models"]["default"].get("kernels", {}) if "default" in names else {}
    for key in kernels:
        cells = []
        for s in names:
            r = result["models"][s]["kernels"].get(key)
            cells.append("n/a" if r is None else
                         f"{r['busiest_worker_over_mean']:.2f}, {r['group_threads']}/{r['block_threads']}, "
                         f"{r['resident_blocks']} blk, {r['registers']} reg, {r['spill_store_bytes']} B")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    failed = [f"- {s}: {result['models'][s]['reason'][-300:]}" for s in result["settings"]
              if result["models"][s]["status"] != "ok"]
    if failed:
        lines += ["", "Failed:", *failed]
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--settings", default=DEFAULT_SETTINGS)
    ap.add_argument("--graph", default=None)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    settings = parse_settings(args.settings)
    args.graph = args.graph or ("pl2k" if args.smoke else "pl1m")
    work = tempfile.mkdtemp(prefix="seastar-launch-model-")
    models, info, nvrtc = {}, {}, None
    for i, (name, env_vars) in enumerate(settings.items()):
        rec = model_setting(env_vars, args, os.path.join(work, str(i)))
        if rec["status"] == "ok":
            rec["summary"] = summary(rec)
            info, nvrtc = rec.pop("graph_info"), rec.pop("nvrtc")
            print(f"[launch model] {name}: worst worker/mean {rec['summary']['max_worker_over_mean']:.2f}, "
                  f"most registers {rec['summary']['max_registers']}, "
                  f"{rec['summary']['spilling_kernels']} kernels spill", flush=True)
        else:
            print(f"[launch model] {name}: failed\n{rec['reason']}", flush=True)
        models[name] = rec
    result = dict(command="python " + " ".join([os.path.relpath(__file__, ROOT)] + sys.argv[1:]),
                  graph=args.graph, width=args.width, graph_info=info, nvrtc=nvrtc, variables=VARIABLES,
                  settings=settings, models=models)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "launch_settings.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    write_md(os.path.join(args.out, "launch_settings.md"), result)
    print(f"wrote {args.out}/launch_settings.json and launch_settings.md")


if __name__ == "__main__":
    main()
