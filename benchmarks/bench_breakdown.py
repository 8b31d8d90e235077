#!/usr/bin/env python
"""Where a training epoch's time goes: torch's dense ops against the graph kernels, per
implementation, and so how far seastar's lead can go while the dense part stays torch's.

    .venv/bin/python benchmarks/bench_breakdown.py --layers gcn,sage,gin --widths 16,64 \\
        --impls fused,dgl,pyg_csr --rounds 2 --out benchmarks/results/breakdown.json

Each configuration is ``benchmarks/run.py``'s training model (conv -> ReLU -> Linear head,
cross-entropy, Adam) on the same graph, in its own process (DGL's in its environment), the
implementations interleaved per round. The child profiles its epochs (``_child.run_breakdown``):
``dense`` is the self time of torch's dense aten ops (GEMMs, activations, loss, optimiser), the
same work in every implementation; ``rest`` is the profiled epoch less that, i.e. the message
passing (seastar's or DGL's kernels, PyG's SpMM) and the Python between ops. ``ceiling`` is the
best peer's epoch over seastar's dense time: the lead seastar would have with graph kernels
that took no time at all.
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
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (graphs, children, the DGL environment)
from _peer_env import dgl_python  # noqa: E402

PEER_LABEL = {"dgl": "DGL", "pyg_csr": "PyG-CSR", "pyg": "PyG"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="pl100k", choices=sorted(run.GRAPHS))
    ap.add_argument("--layers", default="gcn,sage,gin")
    ap.add_argument("--widths", default="16,64")
    ap.add_argument("--impls", default="fused,dgl,pyg_csr")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="epochs timed, then profiled, per process")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--no-install", action="store_true", help="never create the DGL environment")
    ap.add_argument("--out", default="benchmarks/results/breakdown.json")
    args = ap.parse_args()
    impls = args.impls.split(",")
    python = {}
    if "dgl" in impls:
        dgl = dgl_python(install=not args.no_install)
        if dgl.get("python") is None:
            print(f"DGL unavailable: {dgl.get('reason')}", flush=True)
            impls.remove("dgl")
        else:
            python["dgl"] = dgl["python"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="seastar-breakdown-") as work:
        graph = run.prepare_graphs([args.graph], work)[args.graph]
        fields = dict(num_nodes=graph["num_nodes"], num_edges=graph["num_edges"],
                      edge_index_path=graph["edge_index_path"])
        for rnd in range(args.rounds):
            for k, (layer, width) in enumerate((l, int(w)) for l in args.layers.split(",")
                                               for w in args.widths.split(",")):
                shift = (rnd + k) % len(impls)
                for impl in impls[shift:] + impls[:shift]:  # interleaved, order rotated per row
                    cfg = dict(kind="breakdown", layer=layer, width=width, impl=impl, threads=args.threads,
                               repeats=args.repeats, device="cpu", **fields)
                    res = run.run_child(cfg, args.timeout, python=python.get(impl))
                    res.update(layer=layer, width=width, impl=impl, round=rnd)
                    rows.append(res)
                    if res["status"] == "ok":
                        print(f"[r{rnd}] {layer:4s} F={width:<3d} {impl:8s}: epoch {res['epoch_ms']:7.1f} ms, "
                              f"profiled {res['profiled_epoch_ms']:7.1f} = dense {res['dense_ms']:6.1f} + rest "
                              f"{res['rest_ms']:6.1f}", flush=True)
                    else:
                        print(f"[r{rnd}] {layer} F={width} {impl}: {res['status']}: {res.get('reason')}", flush=True)
    summary = summarise(rows, impls)
    for line in summary["lines"]:
        print(line)
    out = dict(rows=rows, summary=summary, graph=graph["label"], threads=args.threads,
               command=" ".join(["benchmarks/bench_breakdown.py"] + sys.argv[1:]),
               load_average=list(os.getloadavg()), date=time.strftime("%Y-%m-%d %H:%M:%S"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


def summarise(rows, impls) -> dict:
    """Medians over rounds per (layer, width, impl), and per row seastar's lead and ceiling."""
    med = {}
    for r in rows:
        if r["status"] == "ok":
            med.setdefault((r["layer"], r["width"], r["impl"]), []).append(r)
    table = []
    lines = ["| layer | F | impl | epoch | dense | rest | seastar lead | ceiling |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for layer, width in sorted({(l, w) for l, w, _ in med}):
        get = {i: {k: statistics.median(r[k] for r in med[(layer, width, i)])
                   for k in ("epoch_ms", "dense_ms", "rest_ms")}
               for i in impls if (layer, width, i) in med}
        if "fused" not in get:
            continue
        peers = {i: v for i, v in get.items() if i != "fused"}
        best = min(peers, key=lambda i: peers[i]["epoch_ms"]) if peers else None
        lead = peers[best]["epoch_ms"] / get["fused"]["epoch_ms"] if best else None
        ceiling = peers[best]["epoch_ms"] / get["fused"]["dense_ms"] if best else None
        table.append(dict(layer=layer, width=width, medians=get, best_peer=best, lead=lead, ceiling=ceiling))
        for i, v in get.items():
            name = "seastar" if i == "fused" else PEER_LABEL.get(i, i)
            extra = f"{lead:.2f}x | {ceiling:.2f}x" if i == "fused" and best else " | "
            lines.append(f"| {layer} | {width} | {name} | {v['epoch_ms']:.1f} ms | {v['dense_ms']:.1f} ms | "
                         f"{v['rest_ms']:.1f} ms | {extra} |")
    return dict(table=table, lines=lines)


if __name__ == "__main__":
    sys.exit(main())
