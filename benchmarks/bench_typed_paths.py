#!/usr/bin/env python
"""The relational layers' paths timed against each other, and what their cost model picks.

    python benchmarks/bench_typed_paths.py --out benchmarks/results/typed_paths.json \\
        [--nodes 2000,20000,200000] [--edges 200000] [--widths 16,64] [--threads 1]

On random typed graphs (4 relations, 3 node types; fewer vertices for the same edges means
more repeated (source, relation) pairs), one training step (forward + backward) of RGCNConv
per path (per_edge, per_pair, per_run) and of HGTConv (4 heads; per_edge, per_pair), with and
without a gradient for ``x``. The paths of one configuration run in one process, interleaved
over two rounds (best of two steps each), since what is compared is their order. Each row
gives the path ``mode="auto"`` chooses (``seastar.nn.relations``'s cost model) and its
regret: the chosen path's time over the fastest's. The cost model's weights are fitted to these
rows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

RGCN_PATHS = ("per_edge", "per_pair", "per_run")
HGT_PATHS = ("per_edge", "per_pair")
HEADS = 4


def typed_graph(n: int, e: int, seed: int = 0):
    import torch
    import seastar as ss

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    return ss.Graph.from_edge_index(ei, num_nodes=n, edge_type=torch.randint(0, 4, (e,), generator=g),
                                    num_edge_types=4, node_type=torch.randint(0, 3, (n,), generator=g),
                                    num_node_types=3)


def step_time(layer, graph, x, reps: int = 2) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        layer(graph, x).sum().backward()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(n: int, e: int, width: int, x_grad: bool) -> dict:
    import torch
    import seastar.nn as snn
    from seastar.nn.relation_pairs import relation_pairs

    graph = typed_graph(n, e)
    x = torch.randn(n, width, requires_grad=x_grad)
    layers = {("rgcn", p): snn.RGCNConv(width, width, 4, mode=p) for p in RGCN_PATHS}
    layers.update({("hgt", p): snn.HGTConv(width, width, 3, 4, heads=HEADS, mode=p) for p in HGT_PATHS})
    for layer in layers.values():  # warm-up: kernels compiled or loaded, per-graph structure built
        layer(graph, x).sum().backward()
    times = {k: [] for k in layers}
    for _ in range(2):
        for k, layer in layers.items():
            times[k].append(step_time(layer, graph, x))
    rgcn, hgt = snn.RGCNConv(width, width, 4), snn.HGTConv(width, width, 3, 4, heads=HEADS)
    row = dict(nodes=n, edges=e, width=width, x_grad=x_grad,
               pairs=relation_pairs(graph, 4).num_pairs,
               rgcn_ms={p: 1e3 * min(times[("rgcn", p)]) for p in RGCN_PATHS},
               hgt_ms={p: 1e3 * min(times[("hgt", p)]) for p in HGT_PATHS},
               # HGT's K and V come from its own trainable linears: they need gradients either way
               rgcn_auto=rgcn.choose_mode(graph, x_grad), hgt_auto=hgt.choose_mode(graph, True),
               rgcn_costs=rgcn.mode_costs(graph, x_grad), hgt_costs=hgt.mode_costs(graph, True))
    for layer in ("rgcn", "hgt"):
        ms = row[f"{layer}_ms"]
        row[f"{layer}_regret"] = ms[row[f"{layer}_auto"]] / min(ms.values())
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "typed_paths.json"))
    ap.add_argument("--nodes", default="2000,20000,200000")
    ap.add_argument("--edges", type=int, default=200_000)
    ap.add_argument("--widths", default="16,64")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for n in map(int, args.nodes.split(",")):
        for width in map(int, args.widths.split(",")):
            for x_grad in (True, False):
                r = measure(n, args.edges, width, x_grad)
                rows.append(r)
                fmt = lambda d: " ".join(f"{k}={v:.1f}" for k, v in d.items())  # noqa: E731
                print(f"N={n} E={args.edges} F={width} x_grad={x_grad} P/E={r['pairs'] / args.edges:.2f} | "
                      f"R-GCN {fmt(r['rgcn_ms'])} ms -> {r['rgcn_auto']} (regret {r['rgcn_regret']:.2f}) | "
                      f"HGT {fmt(r['hgt_ms'])} ms -> {r['hgt_auto']} (regret {r['hgt_regret']:.2f})", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for layer in ("rgcn", "hgt"):
        regrets = [r[f"{layer}_regret"] for r in rows]
        print(f"{layer}: geometric-mean regret {statistics.geometric_mean(regrets):.2f}, worst {max(regrets):.2f}")
    with open(args.out, "w") as fh:
        json.dump({"config": vars(args), "torch": torch.__version__, "rows": rows}, fh, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
