"""What a new vertex program's first forward and first backward cost, compile included.

    python benchmarks/bench_first_compile.py [--rounds 5] [--out benchmarks/results/first_compile.json]

Each measurement runs in a fresh process with an empty kernel cache (SEASTAR_CACHE_DIR in a new
temporary folder), as a user's first call of a program they just wrote: the first forward
(trace, passes, code generation, compiling and loading the forward kernels, the run) and the
first backward (the same for the backward kernels), each with the compiler's share
(``seastar._C.jit_stats``), then a second call of each for what the program costs once compiled.
The programs are written as a user would (docs/language.md): GAT, GATv2 with its
attention vector as a parameter, a mean aggregation, and an EdgeConv-like max over an MLP of edge
differences. Rounds interleave the programs; the report gives each figure's median and its
range over the rounds. Quiet machines only: the compile is CPU work that any other load slows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = ("gat", "gatv2", "sage_mean", "edge_mlp_max")

_CHILD = r'''
import json, sys, time
import torch
import seastar as ss

@ss.vertex_program
def gat(v):
    scores = [ss.leaky_relu(e.src.el + v.er, 0.2) for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))

@ss.vertex_program
def gatv2(v, att):
    scores = [(ss.leaky_relu(e.src.xl + v.xr, 0.2) * att).sum(-1, keepdim=True) for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * e.src.xl for a, e in zip(alpha, v.in_edges()))

@ss.vertex_program
def sage_mean(v):
    return ss.mean(e.src.h for e in v.in_edges()) + v.h

@ss.vertex_program
def edge_mlp_max(v, W):
    return ss.max(ss.relu((e.src.h - v.h) @ W) for e in v.in_edges())

name = sys.argv[1]
torch.manual_seed(0)
N, E, H, C = 2000, 20000, 2, 8
g = ss.Graph.from_edge_index(torch.randint(0, N, (2, E)), num_nodes=N)
p = lambda *s: torch.randn(*s, requires_grad=True)
args = {"gat": lambda: (gat, dict(h=p(N, H, C), el=p(N, H, 1), er=p(N, H, 1))),
        "gatv2": lambda: (gatv2, dict(att=p(H, C), xl=p(N, H, C), xr=p(N, H, C))),
        "sage_mean": lambda: (sage_mean, dict(h=p(N, 16))),
        "edge_mlp_max": lambda: (edge_mlp_max, dict(W=p(16, 16), h=p(N, 16)))}[name]
prog, inputs = args()

def timed(fn):
    s0 = ss._C.jit_stats()
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    s1 = ss._C.jit_stats()
    return out, dt, s1["compiled"] - s0["compiled"], s1["compile_seconds"] - s0["compile_seconds"]

rec = {}
out, rec["forward_s"], rec["forward_kernels"], rec["forward_compile_s"] = timed(lambda: prog(g, **inputs))
grad = torch.randn_like(out)
_, rec["backward_s"], rec["backward_kernels"], rec["backward_compile_s"] = timed(lambda: out.backward(grad))
out2, rec["second_forward_s"], _, _ = timed(lambda: prog(g, **inputs))
_, rec["second_backward_s"], _, _ = timed(lambda: out2.backward(grad))
print(json.dumps(rec))
'''


def one(name: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="seastar-first-compile-") as cache:
        env = dict(os.environ, SEASTAR_CACHE_DIR=cache, PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-c", _CHILD, name], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{name}: the measuring process failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "first_compile.json"))
    args = ap.parse_args(argv)
    names = [n for n in args.programs.split(",") if n]
    unknown = sorted(set(names) - set(PROGRAMS))
    if unknown:
        ap.error(f"unknown program {unknown}; choose from {', '.join(PROGRAMS)}")

    rounds = []
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):  # interleaved, in alternating order
            rounds.append({"round": r, "program": name, **one(name)})
            print(f"round {r} {name}: {json.dumps(rounds[-1])}", file=sys.stderr)

    keys = ("forward_s", "forward_compile_s", "forward_kernels", "backward_s", "backward_compile_s",
            "backward_kernels", "second_forward_s", "second_backward_s")
    summary = {}
    for name in names:
        rs = [x for x in rounds if x["program"] == name]
        summary[name] = {k: {"median": statistics.median(x[k] for x in rs), "min": min(x[k] for x in rs),
                             "max": max(x[k] for x in rs)} for k in keys}
    print(f"{'program':<14}{'1st forward':>22}{'of it compiling':>18}{'1st backward':>22}{'of it compiling':>18}"
          f"{'2nd fwd':>10}{'2nd bwd':>10}")
    for name, s in summary.items():
        span = lambda k: f"{s[k]['median']:.2f} s [{s[k]['min']:.2f}-{s[k]['max']:.2f}]"
        print(f"{name:<14}{span('forward_s'):>22}{s['forward_compile_s']['median']:>16.2f} s"
              f"{span('backward_s'):>22}{s['backward_compile_s']['median']:>16.2f} s"
              f"{s['second_forward_s']['median'] * 1e3:>8.1f}ms{s['second_backward_s']['median'] * 1e3:>8.1f}ms")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": {"cpus": os.cpu_count(), "processor": platform.processor(),
                               "load_1min_at_end": os.getloadavg()[0]},
                   "graph": {"num_nodes": 2000, "num_edges": 20000}, "rounds": rounds, "summary": summary}, f, indent=1)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
