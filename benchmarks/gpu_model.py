"""The GPU kernels without a GPU: load imbalance, bytes per edge, registers and spills (seastar.gpu_model).

    python benchmarks/gpu_model.py --out benchmarks/results/gpu_model [--graphs cora,pl1m]
                                   [--widths 64] [--arch 90] [--smoke]

For every kernel of the benchmark's layers (``_child.build_model``: GCN, GAT 4 heads, SAGE-mean,
GIN, APPNP K=10; the programs one training epoch runs, forward and backward), of R-GCN and HGT
(4 heads) on a typed graph, at each width, and
of every program of the test zoo (``tests/python/models.py``): the launch mapping the code
generator chose, the static traffic (bytes per edge, per vertex, per launch; bytes one call
moves on the graph), NVRTC's registers and spills for ``--arch`` (when NVRTC loads), and the
load imbalance on each graph's degrees with the H200's resident blocks (busiest block over the
mean block; the largest single task over the mean worker). Writes ``gpu_model.json`` and
``gpu_model.md``. ``--smoke``: a 2,000-vertex power-law graph and the zoo only, for the test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from _paths import portable  # noqa: E402

GRAPHS = {"cora": None, "pl1m": 1_000_000, "pl4m": 4_000_000, "pl2k": 2_000}
TYPED_LAYERS = ("rgcn", "hgt", "hgt_per_edge")  # HGTConv's automatic path (per pair), and its typed program
LAYERS = ("gcn", "gat", "sage", "gin", "appnp") + TYPED_LAYERS


def log(msg):
    print(msg, flush=True)


def layer_programs(layer: str, F: int):
    """The fused programs one training epoch of the benchmark's model runs (a 64-vertex graph);
    for the typed layers, one step of the layer alone on a typed graph (4 relations, 2 node
    types, the layer's automatic path, or HGTConv's typed program for ``hgt_per_edge``)."""
    import torch
    import torch.nn.functional as Fn
    import seastar as ss
    from _child import NUM_CLASSES, build_model
    from seastar import gpu_model
    torch.manual_seed(0)
    g = ss.datasets.power_law_graph(64, 4, seed=0).graph
    x, y = torch.randn(64, F), torch.randint(0, NUM_CLASSES, (64,))
    if layer in TYPED_LAYERS:
        src, dst = g.edge_index
        gen = torch.Generator().manual_seed(0)
        g = ss.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=64, num_edge_types=4, num_node_types=2,
                                     edge_type=torch.randint(0, 4, (len(src),), generator=gen),
                                     node_type=torch.randint(0, 2, (64,), generator=gen))
        conv = (ss.nn.RGCNConv(F, F, num_relations=4) if layer == "rgcn"
                else ss.nn.HGTConv(F, F, num_node_types=2, num_edge_types=4, heads=4,
                                   mode="per_edge" if layer == "hgt_per_edge" else "auto"))
        with gpu_model.record_programs() as rp:
            conv(g, x).square().sum().backward()
        return rp.programs
    model = build_model(layer, "fused", F)
    with gpu_model.record_programs() as rp:
        Fn.cross_entropy(model(g, x), y).backward()
    return rp.programs


def zoo_programs():
    """Every program of tests/python/models.py the fused backend runs (float32)."""
    import torch
    import seastar as ss
    from models import MODELS
    graph = ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4,
                                     edge_type=torch.tensor([0, 1, 0, 1]), node_type=torch.tensor([0, 1, 0, 1]),
                                     num_edge_types=2, num_node_types=2)
    out = []
    for name, model in MODELS.items():
        t = {k: v.requires_grad_() for k, v in model.make_inputs(graph).items()}
        compiled = model.program._compiled(graph, t)
        if not compiled.kernels.unsupported:
            out.append((name, compiled))
    return out


def graph_degrees(name):
    import seastar as ss
    from seastar import gpu_model
    n = GRAPHS[name]
    ds = ss.datasets.load(name, build_graph=False) if n is None else ss.datasets.power_law_graph(
        n, 20, seed=0, build_graph=False)
    return gpu_model.degrees(ds.edge_index.numpy(), ds.num_nodes)


def write_md(path, result):
    lines = ["# Seastar's CUDA kernels, modelled without a GPU", "",
             f"`{result['command']}`; device model: {result['device']}; registers: NVRTC "
             f"{result['nvrtc']} for sm_{result['arch']}.", "",
             "busiest/mean: the busiest block's work over the mean block's under the kernel's launch mapping and "
             "dynamic assignment (1.0 = balanced). worker/mean: the same for the units that take work from the "
             "counter (warps for groups of <= 32 threads, else blocks): the kernel's time over a perfect split's, "
             "when every worker moves bytes at the same rate. "
             "task/mean: the largest single task (one warp's centres, or one block's) over the mean worker's work. "
             "B/edge, B/vertex: unique bytes read and written per edge and per vertex (traffic model, float32, "
             "int32 indices).", ""]
    for gname, rows in result["graphs"].items():
        info = result["graph_info"][gname]
        lines += [f"## {gname}: {info['num_nodes']} vertices, {info['num_edges']} edges, largest in-degree "
                  f"{info['max_in_degree']}, largest out-degree {info['max_out_degree']}", "",
                  "| model | program | dir | kernel | what | GT | blocks | busiest/mean | worker/mean | task/mean | B/edge "
                  "| B/vertex | MB per call | regs | spills (st/ld B) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            regs = "-" if r["registers"] is None else str(r["registers"])
            spills = "-" if r["registers"] is None else f"{r['spill_store_bytes']}/{r['spill_load_bytes']}"
            lines.append(f"| {r['model']} | {r['program']} | {r['direction'][:3]} | {r['kernel']} | {r['what']} | "
                         f"{r['group_threads']} | {r['blocks']} | {r['busiest_block_over_mean']:.2f} | "
                         f"{r['busiest_worker_over_mean']:.2f} ({r['worker']}s) | "
                         f"{r['largest_task_over_mean_worker']:.2f} | {r['bytes_per_edge']} | {r['bytes_per_vertex']} | "
                         f"{r['bytes_per_call'] / 1e6:.1f} | {regs} | {spills} |")
        lines.append("")
    with open(path, "w") as fh:
        fh.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--graphs", default=None)
    ap.add_argument("--widths", default="64")
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    import seastar as ss  # noqa: F401
    from seastar import gpu_model
    graphs = (args.graphs or ("pl2k" if args.smoke else "cora,pl1m")).split(",")
    bad = [g for g in graphs if g not in GRAPHS]
    if bad:
        sys.exit(f"gpu_model.py: unknown graph {bad}; known: {', '.join(GRAPHS)}")
    layers = [] if args.smoke else args.layers.split(",")
    bad = [l for l in layers if l not in LAYERS]
    if bad:
        sys.exit(f"gpu_model.py: unknown layer {bad}; known: {', '.join(LAYERS)}")
    widths = [int(w) for w in args.widths.split(",")]
    ok, why = gpu_model.nvrtc_status()
    arch = args.arch if ok else None
    if not ok:
        log(f"[nvrtc] unavailable ({why}): no registers")
    sets = [(f"{layer} F={F}", layer_programs(layer, F)) for F in widths for layer in layers]
    sets.append(("zoo", zoo_programs()))
    result = dict(command="python " + " ".join([os.path.relpath(__file__, ROOT)] + sys.argv[1:]),
                  device=gpu_model.H200.name, arch=args.arch, nvrtc=_nvrtc_version() if ok else None,
                  graphs={}, graph_info={})
    for gname in graphs:
        t0 = time.perf_counter()
        din, dout = graph_degrees(gname)
        result["graph_info"][gname] = dict(num_nodes=len(din), num_edges=int(din.sum()), max_in_degree=int(din.max()),
                                           max_out_degree=int(dout.max()), no_in_edges=int((din == 0).sum()))
        rows = []
        for label, programs in sets:
            rows += gpu_model.model_rows(programs, din, dout, arch=arch, label=label)
        for r in rows:
            r.pop("traffic")  # per-term detail: gpu_model.launches(...) has it; the summary stays
        result["graphs"][gname] = rows
        log(f"[{gname}] {len(rows)} kernels in {time.perf_counter() - t0:.1f} s")
        for r in rows:
            if r["what"].startswith("traversal") and not r["model"] == "zoo":
                log(f"  {r['model']:>10} {r['program']:>28} {r['direction'][:3]} {r['kernel']:>10}: busiest/mean "
                    f"{r['busiest_block_over_mean']:7.2f}, {r['bytes_per_edge']:4d} B/edge, "
                    f"{r['registers']} regs, spills {r['spill_store_bytes']}/{r['spill_load_bytes']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_model.json"), "w") as fh:
        json.dump(portable(result), fh, indent=1)
    write_md(os.path.join(args.out, "gpu_model.md"), result)
    log(f"wrote {args.out}/gpu_model.json and gpu_model.md")


def _nvrtc_version():
    from seastar import _C
    v = _C.nvrtc_version()
    return ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


if __name__ == "__main__":
    main()
