#!/usr/bin/env python
"""Remote feature traffic of partitioned features with and without the hot-vertex cache, on
the synthetic power-law graph (R-MAT), for 2 and 3 gloo processes: one epoch of sampling and
fetching per configuration (no training: the rows fetched do not depend on it).

    .venv/bin/python benchmarks/bench_feature_cache.py --out benchmarks/results/feature_cache.json

Per configuration, rank 0's remote rows, hits, bytes received and hit rate; the cache sized
as a share of the remote rows and chosen by out-degree or by a sampling pass over another
epoch than the one measured.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE))

import seastar as ss  # noqa: E402
from seastar.distributed import launch  # noqa: E402

import _feature_cache_ranks  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=100_000)
    p.add_argument("--avg-degree", type=float, default=10.0)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--fractions", default="0.02,0.05,0.1,0.2")
    p.add_argument("--worlds", default="2,3")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    fractions = [float(f) for f in a.fractions.split(",")]
    results = []
    for world in ss.progress.bar([int(w) for w in a.worlds.split(",")], desc="process counts"):
        with tempfile.TemporaryDirectory() as d:
            out = f"{d}/rank0.json"
            launch.spawn(_feature_cache_ranks.rank, world, args=(out, a.num_nodes, a.avg_degree, a.width, fractions,
                                                                a.batch_size), timeout_s=1200)
            results.append(json.loads(Path(out).read_text()))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(dict(args=vars(a), results=results), indent=2))
    for res in results:
        base = res["rows"][0]["bytes_received"]
        for r in res["rows"]:
            print(f"{res['world_size']} processes | {r['policy']:8s} | cache {r['fraction']:.0%} of remote rows | "
                  f"hit rate {r['hit_rate']:.3f} | {r['bytes_received'] / 1e6:.2f} MB | removed "
                  f"{1 - r['bytes_received'] / base:.1%}")


if __name__ == "__main__":
    main()
