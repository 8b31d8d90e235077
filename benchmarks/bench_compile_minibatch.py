"""Mini-batch training compiled against eager: one torch.compile for every batch of a loader.

    python benchmarks/bench_compile_minibatch.py [--quick] [--num-nodes N] [--batch-size B]
        [--fanouts 15,10] [--max-batches K] [--models sage,gat,rgcn] [--backend inductor]
        [--dynamic none|true] [--out benchmarks/results/compile_minibatch.json]

Per model (a two-layer GraphSAGE, GAT or R-GCN on the synthetic node-classification graph,
Adam): an epoch of ``max-batches`` batches eager, then the same batches with the model
(its two layers and the loss) under ``torch.compile(fullgraph=True)``. Reported: the first
compiled step (mostly compilation) and the second, how many times torch compiled over the epoch (entries in Dynamo's cache, which
a recompile per batch would grow), graph breaks, and the epoch time of both from the third batch
on, with the per-step median. The loader's sampling runs on its own threads in both epochs.
``--quick``: a small graph, a few batches (a smoke run on a laptop or CI).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import seastar as ss  # noqa: E402
import seastar.nn as snn  # noqa: E402
from _paths import portable  # noqa: E402


class TwoLayers(torch.nn.Module):
    """The step compiled: both layers and the loss."""

    def __init__(self, conv1, conv2):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2

    def forward(self, block0, block1, x, y):
        return F.cross_entropy(self.conv2(block1, F.relu(self.conv1(block0, x))), y)


def make_model(name: str, f: int, classes: int, relations: int) -> TwoLayers:
    if name == "sage":
        return TwoLayers(snn.SAGEConv(f, 256), snn.SAGEConv(256, classes))
    if name == "gat":
        return TwoLayers(snn.GATConv(f, 64, heads=4), snn.GATConv(256, classes, concat=False))
    if name == "rgcn":
        return TwoLayers(snn.RGCNConv(f, 64, relations), snn.RGCNConv(64, classes, relations))
    raise ValueError(f"unknown model {name!r}")


def epoch(step, batches):
    """Per-step times of ``step`` over ``batches`` (each timed to the end of its optimizer step)."""
    times = []
    for b in batches:
        t0 = time.perf_counter()
        step(b)
        times.append(time.perf_counter() - t0)
    return times


def run_model(name: str, ds, batches, args) -> dict:
    torch.manual_seed(0)
    eager = make_model(name, ds.x.shape[1], ds.num_classes, args.relations)
    model = make_model(name, ds.x.shape[1], ds.num_classes, args.relations)
    model.load_state_dict(eager.state_dict())
    dynamic = {"none": None, "true": True}[args.dynamic]
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend=args.backend)

    def stepper(m):
        opt = torch.optim.Adam(m.parameters(), lr=0.003)

        def step(b):
            opt.zero_grad()
            loss = m(b.blocks[0], b.blocks[1], b.x, b.y)
            loss.backward()
            opt.step()
        return step

    eager_t = epoch(stepper(eager), batches)
    compiled_t = epoch(stepper(compiled), batches)
    compiles = len(torch._dynamo.eval_frame._debug_get_cache_entry_list(TwoLayers.forward.__code__))
    steady = slice(2, None)  # after any second compile
    return dict(
        model=name, batches=len(batches), backend=args.backend, dynamic=args.dynamic,
        first_step_s=dict(eager=eager_t[0], compiled=compiled_t[0]),
        second_step_s=dict(eager=eager_t[1], compiled=compiled_t[1]),
        compiles=compiles,
        graph_breaks=sum(torch._dynamo.utils.counters["graph_break"].values()),
        epoch_s_from_batch_3=dict(eager=sum(eager_t[steady]), compiled=sum(compiled_t[steady])),
        median_step_ms=dict(eager=1e3 * statistics.median(eager_t[steady]),
                            compiled=1e3 * statistics.median(compiled_t[steady])),
        speedup=sum(eager_t[steady]) / sum(compiled_t[steady]),
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=1_000_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--relations", type=int, default=4, help="edge types of the R-GCN graph")
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--max-batches", type=int, default=40)
    p.add_argument("--models", default="sage,gat,rgcn")
    p.add_argument("--backend", default="inductor")
    p.add_argument("--dynamic", default="none", choices=("none", "true"))
    p.add_argument("--quick", action="store_true", help="a small graph and 8 batches (smoke run)")
    p.add_argument("--out", default="benchmarks/results/compile_minibatch.json")
    args = p.parse_args()
    if args.quick:
        args.num_nodes, args.features, args.batch_size, args.max_batches = 20_000, 32, 256, 8
    fanouts = [int(f) for f in args.fanouts.split(",")]
    if len(fanouts) != 2:
        raise SystemExit("--fanouts: two fanouts, one per layer")
    t0 = time.perf_counter()
    ds = ss.datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree, num_classes=10,
                                                   num_features=args.features, seed=0)
    # the R-GCN's graph: the same edges with a relation each
    gen = torch.Generator().manual_seed(1)
    ei = ds.graph.edge_index
    typed = ss.Graph.from_edge_index(ei, num_nodes=args.num_nodes, num_edge_types=args.relations,
                                     edge_type=torch.randint(0, args.relations, (ei.shape[1],), generator=gen))
    build_s = time.perf_counter() - t0
    results = []
    for name in args.models.split(","):
        graph = typed if name == "rgcn" else ds.graph
        loader = ss.loader.NeighborLoader((graph, ds.x, ds.y), num_neighbors=fanouts, batch_size=args.batch_size,
                                          input_nodes=ds.train_mask, seed=1)
        batches = []
        for b in loader:  # the same batches for both epochs, sampled before either
            batches.append(b)
            if len(batches) == args.max_batches:
                break
        if len(batches) < 3:
            raise SystemExit("need at least 3 batches (--max-batches, --num-nodes)")
        res = run_model(name, ds, batches, args)
        print(f"{name}: {res['compiles']} compiles, {res['graph_breaks']} graph breaks; first step "
              f"{res['first_step_s']['compiled']:.1f} s compiled ({res['first_step_s']['eager']:.2f} s eager); "
              f"epoch from batch 3: {res['epoch_s_from_batch_3']['compiled']:.2f} s compiled, "
              f"{res['epoch_s_from_batch_3']['eager']:.2f} s eager (x{res['speedup']:.2f})", flush=True)
        results.append(res)
    meta = dict(num_nodes=args.num_nodes, avg_degree=args.avg_degree, features=args.features, fanouts=fanouts,
                batch_size=args.batch_size, edges=ds.graph.num_edges, build_s=build_s, quick=args.quick,
                torch=torch.__version__, python=platform.python_version(), machine=platform.machine(),
                threads=torch.get_num_threads(), cpu_count=os.cpu_count())
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(portable(dict(meta=meta, results=results)), f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
