"""torch.compile against eager for the two-layer GCN and GAT of examples/train.py on Cora.

    python benchmarks/bench_compile.py --out benchmarks/results/compile.json [--steps 30] [--warm-cache]

Per model and mode (eager; ``torch.compile(model, fullgraph=True, dynamic=False)`` with the
default inductor backend): the time of the first training step and of the first inference
call (for the compiled model: mostly compilation), then the median, 10th and 90th percentile
of ``steps`` training steps (forward, cross-entropy on the training vertices, backward, Adam
step) and of ``steps`` inference calls (eval mode, no_grad). Ratios are eager / compiled
(above 1: compiled is faster). The fused kernels are the same in both modes; what
compilation can change is the dense work around them (x W, attention halves, activations,
dropout, the loss) and the per-call Python overhead of the layers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
if "--warm-cache" not in sys.argv:  # compile times as a first run sees them: an empty inductor cache
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="seastar-bench-inductor-")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import seastar as ss  # noqa: E402
import seastar.nn as snn  # noqa: E402


class GCN(nn.Module):
    def __init__(self, f_in, classes, hidden=16, dropout=0.5):
        super().__init__()
        self.dropout = dropout
        self.conv1, self.conv2 = snn.GCNConv(f_in, hidden), snn.GCNConv(hidden, classes)

    def forward(self, g, x):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(g, x))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(g, x)


class GAT(nn.Module):
    def __init__(self, f_in, classes, hidden=8, heads=8, dropout=0.6):
        super().__init__()
        self.dropout = dropout
        self.conv1 = snn.GATConv(f_in, hidden, heads=heads, dropout=dropout)
        self.conv2 = snn.GATConv(hidden * heads, classes, heads=1, concat=False, dropout=dropout)

    def forward(self, g, x):
        x = F.dropout(x, self.dropout, self.training)
        x = F.elu(self.conv1(g, x))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(g, x)


def _spread(times):
    q = statistics.quantiles(times, n=10)
    return {"median_ms": 1e3 * statistics.median(times), "p10_ms": 1e3 * q[0], "p90_ms": 1e3 * q[-1]}


def measure(model_cls, data, compiled: bool, steps: int) -> dict:
    torch.manual_seed(0)
    model = model_cls(data.num_features, data.num_classes)
    run = torch.compile(model, fullgraph=True, dynamic=False) if compiled else model
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    g, x, y, mask = data.graph, data.x, data.y, data.train_mask

    def train_step():
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(run(g, x)[mask], y[mask])
        loss.backward()
        opt.step()

    def infer():
        model.eval()
        with torch.no_grad():
            return run(g, x)

    out = {}
    for name, fn in (("train_step", train_step), ("inference", infer)):
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        for _ in range(3):
            fn()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = {"first_call_s": first, **_spread(times)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "compile.json"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warm-cache", action="store_true",
                    help="keep torch's inductor cache (default: a fresh one, so compile times are a first run's)")
    args = ap.parse_args()
    data = ss.datasets.load("cora")
    results = {"dataset": "cora", "num_nodes": data.graph.num_nodes, "num_edges": data.graph.num_edges,
               "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
               "steps": args.steps, "inductor_cache": "warm" if args.warm_cache else "empty",
               "load_average": os.getloadavg(), "models": {}}
    for name, cls in (("gcn", GCN), ("gat", GAT)):
        eager = measure(cls, data, False, args.steps)
        compiled = measure(cls, data, True, args.steps)
        ratios = {k: eager[k]["median_ms"] / compiled[k]["median_ms"] for k in eager}
        results["models"][name] = {"eager": eager, "compiled": compiled, "eager_over_compiled": ratios}
        print(f"{name}: train step eager {eager['train_step']['median_ms']:.2f} ms, compiled "
              f"{compiled['train_step']['median_ms']:.2f} ms (x{ratios['train_step']:.2f}); inference eager "
              f"{eager['inference']['median_ms']:.2f} ms, compiled {compiled['inference']['median_ms']:.2f} ms "
              f"(x{ratios['inference']:.2f}); compiling took {compiled['train_step']['first_call_s']:.1f} s "
              f"(training) + {compiled['inference']['first_call_s']:.1f} s (inference)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
