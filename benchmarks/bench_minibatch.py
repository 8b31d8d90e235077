#!/usr/bin/env python
"""Mini-batch training on the synthetic graph against DGL and PyG: sampling throughput, epoch
time split into sampling and compute, the overlap the loader thread gives, peak memory, accuracy.

    .venv/bin/python benchmarks/bench_minibatch.py --num-nodes 1000000 --out benchmarks/results/minibatch.json
                     [--peers dgl,pyg] [--models sage,gat] [--repeats R] [--max-batches B]

Each configuration runs in its own process (so peak memory is its own), configurations are
interleaved over --repeats rounds, and the JSON keeps every round (the report gives median and
spread). Sampling alone: batches of --batch-size training seeds, fanouts --fanouts, at 1 and 2
threads. Training: GraphSAGE (hidden 256) and GAT (4 heads x 64), 2 layers, --max-batches
batches, with the loader sampling ahead on its thread (prefetch=2) and inline (prefetch=0),
each with the first layer's rows gathered per batch and read in place (``x_in_place``: the
input block reads the feature table through global source ids), then test accuracy on --eval-seeds test vertices (sampled with the same fanouts).

Peers (``_minibatch_peers.py``), same dataset (exported once by a seastar process as .npy),
fanouts, batch size, batches, threads and model shapes: DGL's NeighborSampler + DataLoader with
its SAGEConv / GATConv, run in DGL's own environment (``_peer_env.py``: DGL 2.1 needs torch
2.2); PyG's NeighborLoader with its SAGEConv / GATConv, whose sampler needs torch-sparse or
pyg-lib: built from PyPI's torch-sparse source against this torch on first use
(``_peer_env.pyg_sampler_path``); where either cannot be had, the JSON says why.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE))

from _paths import portable  # noqa: E402
from _spawn import spawn_json  # noqa: E402


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
    if cfg["kind"] == "export":  # the peers' copy of the same dataset
        import numpy as np
        arrays = dict(edge_index=ds.edge_index, x=ds.x, y=ds.y, train_idx=ds.train_mask.nonzero().view(-1),
                      test_idx=ds.test_mask.nonzero().view(-1))
        for k, v in arrays.items():
            np.save(os.path.join(cfg["dataset_dir"], f"{k}.npy"), v.contiguous().numpy())
        return dict(cfg=cfg, build_s=build_s, edges=ds.graph.num_edges)
    if cfg["kind"] != "sample":
        if cfg["model"] == "sage":
            convs = torch.nn.ModuleList([ss.nn.SAGEConv(cfg["features"], 256), ss.nn.SAGEConv(256, 10)])
            act = F.relu
        else:
            convs = torch.nn.ModuleList([ss.nn.GATConv(cfg["features"], 64, heads=4),
                                         ss.nn.GATConv(256, 10, heads=1, concat=False)])
            act = F.elu
        opt = torch.optim.Adam(convs.parameters(), lr=0.003)
    # the peak counts from here, as the peers' does: after the dataset, the model and the
    # optimizer (whose first construction imports torch modules: about 115 MB under torch 2.11)
    reset_peak()
    base = hwm_mb()
    loader = ss.loader.NeighborLoader(ds, num_neighbors=cfg["fanouts"], batch_size=cfg["batch_size"],
                                      input_nodes=ds.train_mask, seed=1, prefetch=cfg.get("prefetch", 2),
                                      x_in_place=cfg.get("x_in_place", False))
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
        def step(b):
            opt.zero_grad()
            h = act(convs[0](b.blocks[0], b.x))
            loss = F.cross_entropy(convs[1](b.blocks[1], h), b.y)
            loss.backward()
            opt.step()
            return loss.item()

        warm = next(iter(ss.loader.NeighborLoader(ds, num_neighbors=cfg["fanouts"], batch_size=cfg["batch_size"],
                                                  input_nodes=ds.train_mask, seed=2, prefetch=0,
                                                  x_in_place=cfg.get("x_in_place", False))))
        step(warm)  # compiles (or loads) the kernels outside the timed epoch
        del warm  # its gathered features would stay alive beside the epoch's (the peers keep none)
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
        test = ds.test_mask.nonzero().view(-1)[:cfg["eval_seeds"]]
        correct = 0
        with torch.no_grad():
            for b in ss.loader.NeighborLoader(ds, num_neighbors=cfg["fanouts"], batch_size=cfg["batch_size"],
                                              input_nodes=test, shuffle=False, seed=3, prefetch=0,
                                              x_in_place=cfg.get("x_in_place", False)):
                h = act(convs[0](b.blocks[0], b.x))
                correct += int((convs[1](b.blocks[1], h).argmax(-1) == b.y).sum())
        out["test_accuracy"] = correct / max(int(test.numel()), 1)
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
    p.add_argument("--eval-seeds", type=int, default=4096, help="test vertices the accuracy is measured on")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--models", default="sage,gat")
    p.add_argument("--peers", default="dgl,pyg", help="peers to run (subset of dgl,pyg; empty: none)")
    p.add_argument("--no-install", action="store_true",
                   help="never create the DGL environment or build torch-sparse (peers then recorded as unavailable)")
    p.add_argument("--timeout", type=float, default=1200, help="per-process limit, seconds")
    p.add_argument("--quick", action="store_true", help="a small graph and 3 batches (smoke test)")
    p.add_argument("--out", default="benchmarks/results/minibatch.json")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.quick:
        args.num_nodes, args.max_batches, args.repeats, args.batch_size, args.eval_seeds = 5000, 3, 1, 256, 256
    base = dict(num_nodes=args.num_nodes, avg_degree=args.avg_degree, features=args.features,
                fanouts=[int(f) for f in args.fanouts.split(",")], batch_size=args.batch_size,
                max_batches=args.max_batches, eval_seeds=args.eval_seeds)
    models = [m for m in args.models.split(",") if m]
    peers, peer_notes = _peer_runners([x for x in args.peers.split(",") if x], args)
    configs = [dict(base, impl="seastar", kind="sample", threads=t, prefetch=0) for t in (1, 2)]
    configs += [dict(base, impl="seastar", kind="train", model=m, threads=1, prefetch=pf, x_in_place=xp)
                for m in models for xp in (False, True) for pf in (0, 2)]
    with tempfile.TemporaryDirectory(prefix="seastar-minibatch-") as folder:
        if peers:
            exp = spawn_json(__file__, dict(base, kind="export", threads=1, dataset_dir=folder), 1, args.timeout)
            if exp.get("status", "ok") != "ok":
                raise SystemExit(f"exporting the dataset for the peers failed: {exp}")
        for impl in peers:
            configs += [dict(base, impl=impl, kind="sample", threads=t, dataset_dir=folder) for t in (1, 2)]
            configs += [dict(base, impl=impl, kind="train", model=m, threads=1, dataset_dir=folder) for m in models]
        rounds = []
        for r in range(args.repeats):
            for cfg in configs:  # interleaved: one of each per round
                if cfg["impl"] == "seastar":
                    res = spawn_json(__file__, cfg, cfg["threads"], args.timeout)
                else:
                    run = peers[cfg["impl"]]
                    res = spawn_json(str(HERE / "_minibatch_peers.py"), cfg, cfg["threads"], args.timeout,
                                     python=run["python"], env_extra=run.get("env"))
                res.setdefault("cfg", cfg)
                res.setdefault("status", "ok")
                res["round"] = r
                rounds.append(res)
                print(_line(res), flush=True)
    report = dict(rounds=rounds, summary=_summary(rounds), comparison=_comparison(rounds), peers=peer_notes,
                  load_average=os.getloadavg(), date=time.strftime("%Y-%m-%d %H:%M:%S"),
                  command=" ".join(sys.argv))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(portable(report), indent=2))
    for row in report["summary"]:
        print(row)
    for row in report["comparison"]:
        print(row["text"])


def _name(cfg):
    who = cfg.get("impl", "seastar")
    if cfg["kind"] == "sample":
        return f"{who}: sample, {cfg['threads']} thread(s)"
    pf = f", prefetch={cfg['prefetch']}" if who == "seastar" else ""
    pf += ", x in place" if cfg.get("x_in_place") else ""
    return f"{who}: train {cfg['model']}{pf}, {cfg['threads']} thread(s)"


def _line(res):
    if res.get("status", "ok") != "ok":
        return f"[round {res['round']}] {_name(res['cfg'])}: {res['status']}: {res.get('reason')}"
    extra = ""
    if res["cfg"]["kind"] == "train":
        extra = (f", sampling {res['sample_s']:.2f} s, waited {res['wait_s']:.2f} s, "
                 f"compute {res['compute_s']:.2f} s, test accuracy {res['test_accuracy']:.3f}")
    return (f"[round {res['round']}] {_name(res['cfg'])}: {res['batches']} batches in {res['seconds']:.2f} s, "
            f"{res['seeds_per_s']:.0f} seeds/s{extra}, peak +{res['peak_mb_above_dataset']:.0f} MB")


def _groups(rounds):
    by = {}
    for r in rounds:
        if r.get("status", "ok") == "ok":
            by.setdefault(_name(r["cfg"]), []).append(r)
    return by


def _summary(rounds):
    out = []
    for name, rs in _groups(rounds).items():
        sps = [r["seeds_per_s"] for r in rs]
        out.append(f"{name}: median {statistics.median(sps):.0f} seeds/s (min {min(sps):.0f}, max {max(sps):.0f}), "
                   f"peak +{max(r['peak_mb_above_dataset'] for r in rs):.0f} MB")
    return out


def _med(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


TRAIN_KEYS = ("seconds", "sample_s", "wait_s", "compute_s", "seeds_per_s", "peak_mb_above_dataset", "test_accuracy")


def _comparison(rounds):
    """Seastar against the faster peer: sampling throughput, the whole run's time (seastar with
    its loader thread), peak memory (against the leaner peer), accuracy side by side."""
    g = _groups(rounds)
    rows = []
    for t in (1, 2):
        s = g.get(f"seastar: sample, {t} thread(s)")
        ps = {p: g.get(f"{p}: sample, {t} thread(s)") for p in ("dgl", "pyg")}
        ps = {p: v for p, v in ps.items() if v}
        if s and ps:
            best = max(ps, key=lambda p: _med(ps[p], "seeds_per_s"))
            ratio = _med(s, "seeds_per_s") / _med(ps[best], "seeds_per_s")
            rows.append(dict(row=f"sampling, {t} thread(s)", seastar_seeds_per_s=_med(s, "seeds_per_s"),
                             peers_seeds_per_s={p: _med(v, "seeds_per_s") for p, v in ps.items()}, best_peer=best,
                             ratio=ratio, text=f"sampling, {t} thread(s): seastar {_med(s, 'seeds_per_s'):.0f} "
                             f"seeds/s vs {best} {_med(ps[best], 'seeds_per_s'):.0f}: {ratio:.2f}x"))
    models = sorted({r["cfg"]["model"] for r in rounds if r["cfg"]["kind"] == "train"})
    for m in models:
        s = g.get(f"seastar: train {m}, prefetch=2, 1 thread(s)")
        ps = {p: g.get(f"{p}: train {m}, 1 thread(s)") for p in ("dgl", "pyg")}
        ps = {p: v for p, v in ps.items() if v}
        if not (s and ps):
            continue
        fast = min(ps, key=lambda p: _med(ps[p], "seconds"))
        lean = min(ps, key=lambda p: _med(ps[p], "peak_mb_above_dataset"))
        inline = g.get(f"seastar: train {m}, prefetch=0, 1 thread(s)") or []
        row = dict(row=f"train {m}, 1 thread", best_peer=fast, leanest_peer=lean,
                   seastar={k: _med(s, k) for k in TRAIN_KEYS},
                   seastar_inline={k: _med(inline, k) for k in TRAIN_KEYS} if inline else None,
                   peers={p: {k: _med(v, k) for k in TRAIN_KEYS} for p, v in ps.items()})
        pf, pl, ss_ = row["peers"][fast], row["peers"][lean], row["seastar"]
        row["time_ratio"] = pf["seconds"] / ss_["seconds"]
        row["sampling_ratio"] = pf["sample_s"] / ss_["sample_s"] if ss_["sample_s"] else None
        row["memory_ratio"] = pl["peak_mb_above_dataset"] / max(ss_["peak_mb_above_dataset"], 1e-9)
        # prefetching holds `prefetch` batches more: the peers' loaders sample inline
        si = row["seastar_inline"]
        row["memory_ratio_inline"] = pl["peak_mb_above_dataset"] / max(si["peak_mb_above_dataset"], 1e-9) if si \
            else None
        row["text"] = (f"train {m}: seastar {ss_['seconds']:.2f} s (sampling {ss_['sample_s']:.2f} s on its thread, "
                       f"compute {ss_['compute_s']:.2f} s, acc {ss_['test_accuracy']:.3f}) vs {fast} "
                       f"{pf['seconds']:.2f} s (sampling {pf['sample_s']:.2f} s, compute {pf['compute_s']:.2f} s, "
                       f"acc {pf['test_accuracy']:.3f}): {row['time_ratio']:.2f}x; peak "
                       f"+{ss_['peak_mb_above_dataset']:.0f} MB vs {lean} +{pl['peak_mb_above_dataset']:.0f} MB: "
                       f"{row['memory_ratio']:.2f}x")
        if si:
            row["text"] += (f"; sampling inline (prefetch=0): {si['seconds']:.2f} s, peak "
                            f"+{si['peak_mb_above_dataset']:.0f} MB: {pl['peak_mb_above_dataset'] / max(si['peak_mb_above_dataset'], 1e-9):.2f}x")
        for pfn in (2, 0):  # the same with the input block reading x in place
            xs = g.get(f"seastar: train {m}, prefetch={pfn}, x in place, 1 thread(s)")
            if xs:
                x = row[f"seastar_x_in_place_prefetch{pfn}"] = {k: _med(xs, k) for k in TRAIN_KEYS}
                row[f"time_ratio_x_in_place_prefetch{pfn}"] = pf["seconds"] / x["seconds"]
                row[f"memory_ratio_x_in_place_prefetch{pfn}"] = pl["peak_mb_above_dataset"] / max(
                    x["peak_mb_above_dataset"], 1e-9)
                row["text"] += (f"; x in place, prefetch={pfn}: {x['seconds']:.2f} s "
                                f"({row[f'time_ratio_x_in_place_prefetch{pfn}']:.2f}x), acc {x['test_accuracy']:.3f}, "
                                f"peak +{x['peak_mb_above_dataset']:.0f} MB "
                                f"({row[f'memory_ratio_x_in_place_prefetch{pfn}']:.2f}x)")
        rows.append(row)
    return rows


def _peer_runners(wanted, args):
    """{peer: {"python", "env"}} for the peers that can run, and a note for each peer."""
    import _peer_env
    runners, notes = {}, {}
    if "dgl" in wanted:
        env = _peer_env.dgl_python(install=not args.no_install)
        if env["python"]:
            runners["dgl"] = dict(python=env["python"])
            notes["dgl"] = dict(status="measured", versions=env["versions"], environment=env["source"])
        else:
            notes["dgl"] = dict(status="not measured", reason=env["reason"])
    if "pyg" in wanted:
        info = _peer_env.pyg_sampler_path(build=not args.no_install)
        if info["path"]:
            runners["pyg"] = dict(python=sys.executable, env=dict(
                PYTHONPATH=os.pathsep.join(p for p in (info["path"], os.environ.get("PYTHONPATH")) if p)))
            notes["pyg"] = dict(status="measured", sampler=info)
        else:
            notes["pyg"] = dict(status="not measured", reason=info["reason"])
    return runners, notes


if __name__ == "__main__":
    main()
