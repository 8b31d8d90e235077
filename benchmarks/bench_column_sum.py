"""A bias gradient's column sum, ``g.sum(0)`` of a [rows, width] gradient, three ways.

    python benchmarks/bench_column_sum.py [--rows 10000,40000] [--widths 64,256] [--rounds 30]
        [--out benchmarks/results/column_sum.json]

``aten``: eager ``g.sum(0)``. ``inductor``: the same sum in compiled code (``dynamic=True``, as
a mini-batch's sizes are), which Inductor's CPU backend generates itself. ``seastar_op``: compiled
code that calls ``seastar::column_sum`` (what compiled layers do for their bias gradients,
``seastar/nn/_column_sum.py``). Both compiled ways include a compiled call's own cost (its guards
and wrapper), which inside a compiled training step is paid once for the whole step. The three
run in interleaved rounds, in rotating order; reported per shape: each one's median and
quartiles, and the ratio of each median to the fastest's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from _report import quartiles  # noqa: E402
from seastar.nn._column_sum import column_sum  # noqa: E402


def _timed(fn, g, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(g)
    return (time.perf_counter() - t0) / reps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default="10000,40000")
    p.add_argument("--widths", default="64,256")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--reps", type=int, default=10, help="calls timed together in one round")
    p.add_argument("--out", default="benchmarks/results/column_sum.json")
    a = p.parse_args()
    ways = {"aten": lambda g: g.sum(0),
            "inductor": torch.compile(lambda g: g.sum(0), dynamic=True),
            "seastar_op": torch.compile(lambda g: column_sum(g), dynamic=True)}
    results = []
    for rows in (int(r) for r in a.rows.split(",")):
        for width in (int(w) for w in a.widths.split(",")):
            g = torch.randn(rows, width)
            for fn in ways.values():  # compile, warm up, and check each against aten
                torch.testing.assert_close(fn(g), g.sum(0), rtol=1e-4, atol=1e-3)
            times = {k: [] for k in ways}
            names = list(ways)
            for r in range(a.rounds):
                for k in names[r % len(names):] + names[:r % len(names)]:
                    times[k].append(_timed(ways[k], g, a.reps))
            med = {k: quartiles(v)[1] for k, v in times.items()}
            best = min(med.values())
            row = dict(rows=rows, width=width,
                       us={k: dict(zip(("q1", "median", "q3"), (1e6 * q for q in quartiles(v))))
                           for k, v in times.items()},
                       over_fastest={k: med[k] / best for k in med})
            results.append(row)
            print(f"[{rows}, {width}]  " + "  ".join(f"{k} {1e6 * med[k]:.0f} us ({med[k] / best:.2f}x)"
                                                     for k in names))
    meta = dict(torch=torch.__version__, python=platform.python_version(), machine=platform.machine(),
                threads=torch.get_num_threads(), cpu_count=os.cpu_count(), rounds=a.rounds, reps=a.reps)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(dict(meta=meta, results=results), f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
