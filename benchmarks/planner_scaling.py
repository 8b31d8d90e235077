#!/usr/bin/env python
"""A simulation, not a measurement: the planner's formulas (seastar.distributed.planner) for 1
to 64 machines of one process each, with this machine's measured compute rates and an assumed
network, on a synthetic graph. Writes the candidates' predicted epoch times and memory.

    .venv/bin/python benchmarks/planner_scaling.py --out benchmarks/results/planner_scaling.json

Assumed network (stated, not measured): ``--bandwidth`` bytes/s per link (default 1.25e9, 10
Gbit Ethernet), ``--latency`` seconds per message (default 50 us), ``--skew`` (wait for the
slowest machine per second of compute; default 0.05: dedicated machines, unlike the shared
development machine). Every machine has a core for its loader thread. Halos are those of a
random partition (METIS cuts less on graphs with communities).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import seastar as ss  # noqa: E402
import torch  # noqa: E402
from seastar.distributed.calibration import compute_rates  # noqa: E402
from seastar.distributed.planner import plan  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=500_000)
    p.add_argument("--avg-degree", type=float, default=10.0)
    p.add_argument("--num-features", type=int, default=64)
    p.add_argument("--train-fraction", type=float, default=0.05)
    p.add_argument("--bandwidth", type=float, default=1.25e9)
    p.add_argument("--latency", type=float, default=50e-6)
    p.add_argument("--skew", type=float, default=0.05)
    p.add_argument("--machines", default="1,2,4,8,16,32,64")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    torch.set_num_threads(1)
    ds = ss.datasets.synthetic_node_classification(a.num_nodes, avg_degree=a.avg_degree, num_features=a.num_features,
                                                   train_fraction=a.train_fraction, val_fraction=0.2)
    cal = compute_rates()
    cal.update(latency_s=a.latency, bandwidth=a.bandwidth, skew=a.skew, cores=2, threads=1,
               network="assumed: see --bandwidth, --latency, --skew")
    spec = dict(kind="sage", hidden=32, fanouts=(10, 5), batch_size=512)
    rows = []
    for k in ss.progress.bar([int(m) for m in a.machines.split(",")], desc="machines"):
        pl = plan(ds, k, spec, calibration=cal, processes_per_machine=1)
        cal.update({key: pl.calibration[key] for key in ("step_fixed_s", "step_scale")})  # fitted once
        for r in pl.rows:
            rows.append(dict(machines=k, candidate=r["candidate"], mode=r["mode"], features=r["features"],
                             epoch_s=r["epoch_s"], comm_s=r["comm_s"], comm_bytes=r["comm_bytes"],
                             peak_mb=r["peak_mb"], steps=r["steps"], chosen=r is pl.choice))
    out = dict(kind="simulation", graph=dict(num_nodes=a.num_nodes, avg_degree=a.avg_degree,
                                             num_features=a.num_features, train_fraction=a.train_fraction),
               model=spec, calibration=cal, rows=rows)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2, default=str))
    print("| machines | candidate | epoch | communication | peak memory / process | |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['machines']} | {r['candidate'].split(' (')[0]} | {r['epoch_s'] * 1e3:.0f} ms | "
              f"{r['comm_s'] * 1e3:.1f} ms | {r['peak_mb']:.0f} MB | {'chosen' if r['chosen'] else ''} |")


if __name__ == "__main__":
    main()
