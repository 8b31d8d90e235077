#!/usr/bin/env python
"""Distributed training on the synthetic graph, 1 vs 2 processes of 1 thread each, both modes:
epoch time, time in communication, bytes exchanged per epoch, peak memory per process; and the
METIS edge cut and halo sizes of the same graph at larger part counts, for the scaling model
of docs/DISTRIBUTED.md.

    .venv/bin/python benchmarks/bench_distributed.py --num-nodes 500000 --out benchmarks/results/distributed.json

Each run is ``torchrun --standalone --nproc_per_node=W examples/distributed/train.py`` (its
own processes, so peak memory is theirs); the first epoch (kernel compilation, first touch) is
left out of the means. Full-graph: GCN, hidden --hidden; the lower bound of the halo traffic
per epoch is boundary rows x hidden x 4 bytes x 2 (the second layer's input, forward and
backward; the first layer's input rows are constant and fetched once, reported apart).
Mini-batch: GraphSAGE, --batch-size seeds per rank, fanouts 10,5.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(HERE))

from _paths import portable  # noqa: E402


def run(mode: str, world: int, args, work: Path) -> dict:
    out = work / f"{mode}-{world}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
           str(ROOT / "examples" / "distributed" / "train.py"), "--mode", mode, "--dataset", "synthetic",
           "--num-nodes", str(args.num_nodes), "--avg-degree", str(args.avg_degree),
           "--num-features", str(args.num_features), "--train-fraction", str(args.train_fraction),
           "--model", "gcn" if mode == "fullgraph" else "sage", "--hidden", str(args.hidden),
           "--epochs", str(args.epochs), "--threads", "1", "--timeout", "600", "--json", str(out),
           "--partition-dir", str(work / f"parts-{world}"), "--shared-file", str(work / "shared.pt"),
           "--batch-size", str(args.batch_size)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        raise RuntimeError(f"{mode} on {world} processes failed:\n{(r.stdout + r.stderr)[-4000:]}")
    res = json.loads(out.read_text())
    h = res["history"][1:] or res["history"]
    row = dict(mode=mode, processes=world, wall_s=time.perf_counter() - t0,
               epoch_s=statistics.mean(e["epoch_s"] for e in h),
               epoch_s_spread=[min(e["epoch_s"] for e in h), max(e["epoch_s"] for e in h)],
               epoch_cpu_s_rank0=statistics.mean(e["epoch_cpu_s"] for e in h),
               peak_rss_mb=res["peak_rss_mb"], num_parameters=res["num_parameters"])
    grad_bytes = res["num_parameters"] * 4
    if mode == "fullgraph":
        row.update(halo_s=statistics.mean(e["halo_s"] for e in h),
                   allreduce_s=statistics.mean(e["allreduce_s"] for e in h),
                   halo_bytes_per_epoch=res["halo_bytes_per_epoch_all_ranks"], boundary_rows=res["boundary_rows"],
                   edge_cut=res["edge_cut"], input_halo_bytes_once_rank0=res["input_halo_bytes"],
                   gradient_bytes_per_epoch=grad_bytes, test_accuracy=res["history"][-1]["test"])
        row["comm_s"] = row["halo_s"] + row["allreduce_s"]
    else:
        row.update(batches_per_epoch=res["batches_per_epoch"], gradient_bytes_per_epoch=grad_bytes *
                   res["batches_per_epoch"], test_accuracy=res["final"].get("test"))
    return row


def halo_bytes_total(world: int, work: Path) -> int:
    """Bytes all ranks sent per training epoch, from the parts' halo sizes (checked against rank 0's count)."""
    from seastar.distributed import read_report

    return read_report(work / f"parts-{world}")["boundary_rows"]


def scaling_cuts(args, parts) -> list:
    import seastar as ss

    ds = ss.datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree,
                                                   num_features=1, seed=0, train_fraction=args.train_fraction,
                                                   val_fraction=min(0.2, (1 - args.train_fraction) / 2))
    rows = []
    for k in parts:
        t0 = time.perf_counter()
        rep = ss.distributed.partition_graph(ds, k, Path(args.work) / f"cut-{k}", method="metis")
        halos = [p["halo"] for p in rep["parts"]]
        rows.append(dict(parts=k, edge_cut=rep["edge_cut"], edge_cut_fraction=rep["edge_cut_fraction"],
                         boundary_rows=rep["boundary_rows"], max_halo=max(halos), max_owned=max(p["owned"] for p in
                                                                                             rep["parts"]),
                         imbalance=rep["imbalance"], seconds=time.perf_counter() - t0))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-nodes", type=int, default=500_000)
    ap.add_argument("--avg-degree", type=float, default=10.0)
    ap.add_argument("--num-features", type=int, default=64)
    ap.add_argument("--train-fraction", type=float, default=0.05)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--scaling-parts", default="16,64")
    ap.add_argument("--work", default="/tmp/seastar-bench-distributed")
    ap.add_argument("--out", default=str(HERE / "results" / "distributed.json"))
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for mode in ("fullgraph", "minibatch"):
        for world in (1, 2):
            row = run(mode, world, args, work)
            if mode == "fullgraph":
                rows_total = halo_bytes_total(world, work)
                row["halo_lower_bound_bytes_per_epoch"] = rows_total * args.hidden * 4 * 2
                row["halo_bytes_over_lower_bound"] = (row["halo_bytes_per_epoch"] /
                                                      max(1, row["halo_lower_bound_bytes_per_epoch"]))
            rows.append(row)
            print(json.dumps(row), flush=True)
    cuts = scaling_cuts(args, [int(k) for k in args.scaling_parts.split(",") if k])
    for c in cuts:
        print(json.dumps(c), flush=True)
    result = dict(config=vars(args), runs=rows, metis_cuts=cuts)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(portable(result), indent=2))


if __name__ == "__main__":
    main()
