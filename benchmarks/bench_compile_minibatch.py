"""Mini-batch training compiled against eager: one torch.compile for every batch of a loader.

    python benchmarks/bench_compile_minibatch.py [--quick] [--num-nodes N] [--batch-size B]
        [--fanouts 15,10] [--max-batches K (0: an epoch)] [--models sage,gat,rgcn,hgt]
        [--backend inductor] [--dynamic none|true] [--prefetch 2] [--device cpu|cuda]
        [--out benchmarks/results/compile_minibatch.json]

Per model (a two-layer GraphSAGE, GAT, R-GCN or HGT on the synthetic node-classification graph,
the typed models on the same edges with random relations and node types; Adam): an eager copy
and a compiled copy (its two layers and the loss under ``torch.compile(fullgraph=True)``) train
on the same batches, interleaved: every batch is a step of each, in alternating order, each
timed to the end of its optimizer step (the loaders sample on their own threads). Each model has
its own loader, both with one seed: the same samples as separate graphs, so what a graph derives
once and keeps (a derived graph, run plans) is paid by each model, as in training, never by
whichever stepped first. Reported: the
first compiled step (mostly compilation) and the second, how many times torch compiled over
the run (entries in Dynamo's cache, which a recompile per batch would grow; each change of the
thread count by seastar's thread governor, reported beside it, is one too), graph breaks, and
from the third batch on the sum, the median and the quartiles of each one's steps, with the
ratio eager / compiled (above 1: compiled is faster) of the sums and, batch by batch, its
median and quartiles (a batch's two steps run back to back, so that ratio does not drift with
the machine's load over the run). ``--quick``: a small graph, a few batches
(a smoke run on a laptop or CI).
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
import torch.nn.functional as F  # noqa: E402

import seastar as ss  # noqa: E402
import seastar.nn as snn  # noqa: E402
from _paths import portable  # noqa: E402
from _report import quartiles  # noqa: E402
from seastar.progress import bar  # noqa: E402


class TwoLayers(torch.nn.Module):
    """The step compiled: both layers and the loss."""

    def __init__(self, conv1, conv2):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2

    def forward(self, block0, block1, x, y):
        return F.cross_entropy(self.conv2(block1, F.relu(self.conv1(block0, x))), y)


def make_model(name: str, f: int, classes: int, relations: int, node_types: int) -> TwoLayers:
    if name == "sage":
        return TwoLayers(snn.SAGEConv(f, 256), snn.SAGEConv(256, classes))
    if name == "gat":
        return TwoLayers(snn.GATConv(f, 64, heads=4), snn.GATConv(256, classes, concat=False))
    if name == "rgcn":
        return TwoLayers(snn.RGCNConv(f, 64, relations), snn.RGCNConv(64, classes, relations))
    if name == "hgt":
        return TwoLayers(snn.HGTConv(f, 64, node_types, relations, heads=4),
                         snn.HGTConv(64, classes, node_types, relations))
    raise ValueError(f"unknown model {name!r}")


def stepper(m, device: torch.device):
    """One training step of ``m`` on a batch, timed to the end of its optimizer step (on a GPU,
    to the end of its kernels: synchronised before and after)."""
    opt = torch.optim.Adam(m.parameters(), lr=0.003)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step(b):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = m(b.blocks[0], b.blocks[1], b.x, b.y)
        loss.backward()
        opt.step()
        sync()
        return time.perf_counter() - t0
    return step


def spread(times) -> dict:
    q = quartiles(times)
    return dict(sum_s=sum(times), median_ms=1e3 * q[1], q1_ms=1e3 * q[0], q3_ms=1e3 * q[2])


def spread_ratio(ratios) -> dict:
    q = quartiles(ratios)
    return dict(median=q[1], q1=q[0], q3=q[2])


def same_batch(a, b) -> bool:
    """Whether two loaders' batches are the same sample (their sampled vertices and blocks' sizes)."""
    return torch.equal(a.input_nodes, b.input_nodes) and all(
        (x.num_src, x.num_dst, x.num_edges) == (y.num_src, y.num_dst, y.num_edges) for x, y in zip(a.blocks, b.blocks))


def run_model(name: str, ds, loaders, args) -> dict:
    torch.manual_seed(0)
    eager = make_model(name, ds.x.shape[1], ds.num_classes, args.relations, args.node_types)
    model = make_model(name, ds.x.shape[1], ds.num_classes, args.relations, args.node_types)
    model.load_state_dict(eager.state_dict())
    eager, model = eager.to(args.device), model.to(args.device)
    dynamic = {"none": None, "true": True}[args.dynamic]
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend=args.backend)
    steps = dict(eager=stepper(eager, args.device), compiled=stepper(compiled, args.device))
    governed = ss.thread_governor_stats()
    times = dict(eager=[], compiled=[])
    batches = zip(*loaders)
    for i, (be, bc) in enumerate(bar(batches, desc=name, total=args.max_batches or len(loaders[0]))):
        if args.max_batches and i == args.max_batches:
            break
        if i < 2 and not same_batch(be, bc):
            raise SystemExit("the two loaders sampled different batches")
        batch = dict(eager=be, compiled=bc)
        for which in (("eager", "compiled") if i % 2 else ("compiled", "eager")):
            times[which].append(steps[which](batch[which]))
    if len(times["eager"]) < 3:
        raise SystemExit("need at least 3 batches (--max-batches, --num-nodes)")
    compiles = len(torch._dynamo.eval_frame._debug_get_cache_entry_list(TwoLayers.forward.__code__))
    # the thread governor (off unless SEASTAR_THREAD_GOVERNOR=1) lowers torch's thread count while
    # other processes take cores; compiled code guards on that count, so each change is a compile
    now = ss.thread_governor_stats()
    governor = {k: now[k] - governed[k] for k in ("lowered", "restored")}
    steady = {k: t[2:] for k, t in times.items()}  # after any second compile
    modes = {}
    for layer in ("conv1", "conv2"):
        mode = getattr(getattr(eager, layer), "last_mode", None)
        if mode is not None:
            modes[layer] = mode
    return dict(
        model=name, batches=len(times["eager"]), backend=args.backend, dynamic=args.dynamic,
        first_step_s={k: t[0] for k, t in times.items()}, second_step_s={k: t[1] for k, t in times.items()},
        compiles=compiles, thread_governor=governor, graph_breaks=sum(torch._dynamo.utils.counters["graph_break"].values()),
        from_batch_3={k: spread(t) for k, t in steady.items()},
        eager_over_compiled=sum(steady["eager"]) / sum(steady["compiled"]),
        # each batch is a step of both, so its ratio is free of the machine's drift over the run
        paired_ratio=spread_ratio([e / c for e, c in zip(steady["eager"], steady["compiled"])]),
        eager_paths=modes,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=1_000_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--relations", type=int, default=4, help="edge types of the typed graph")
    p.add_argument("--node-types", type=int, default=3, help="node types of the typed graph (HGT)")
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--max-batches", type=int, default=40, help="batches per model; 0: one epoch")
    p.add_argument("--models", default="sage,gat,rgcn,hgt")
    p.add_argument("--backend", default="inductor")
    p.add_argument("--dynamic", default="none", choices=("none", "true"))
    p.add_argument("--device", default="cpu", help="cpu or cuda: where the models train (the loader puts "
                   "each batch there)")
    p.add_argument("--prefetch", type=int, default=2,
                   help="batches the loader samples ahead on its threads, beside the steps (0: each batch "
                        "is sampled before its steps, which then run alone)")
    p.add_argument("--quick", action="store_true", help="a small graph and 8 batches (smoke run)")
    p.add_argument("--out", default="benchmarks/results/compile_minibatch.json")
    args = p.parse_args()
    args.device = torch.device(args.device)
    if args.device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    if args.quick:
        args.num_nodes, args.features, args.batch_size, args.max_batches = 20_000, 32, 256, 8
    fanouts = [int(f) for f in args.fanouts.split(",")]
    if len(fanouts) != 2:
        raise SystemExit("--fanouts: two fanouts, one per layer")
    t0 = time.perf_counter()
    ds = ss.datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree, num_classes=10,
                                                   num_features=args.features, seed=0)
    # the typed models' graph: the same edges with a relation each, a node type per vertex
    gen = torch.Generator().manual_seed(1)
    ei = ds.graph.edge_index
    typed = ss.Graph.from_edge_index(ei, num_nodes=args.num_nodes, num_edge_types=args.relations,
                                     edge_type=torch.randint(0, args.relations, (ei.shape[1],), generator=gen),
                                     num_node_types=args.node_types,
                                     node_type=torch.randint(0, args.node_types, (args.num_nodes,), generator=gen))
    build_s = time.perf_counter() - t0
    results = []
    for name in args.models.split(","):
        graph = typed if name in ("rgcn", "hgt") else ds.graph
        # a loader per model, one seed: the same batches, each model with its own graphs, so per-graph
        # work a graph keeps (derived graphs, run plans) is paid by each, as in training
        loaders = [ss.loader.NeighborLoader((graph, ds.x, ds.y), num_neighbors=fanouts, batch_size=args.batch_size,
                                            input_nodes=ds.train_mask, seed=1, drop_last=True,
                                            prefetch=args.prefetch, device=args.device) for _ in range(2)]
        res = run_model(name, ds, loaders, args)
        e, c = res["from_batch_3"]["eager"], res["from_batch_3"]["compiled"]
        gov = res["thread_governor"]
        print(f"{name}: {res['batches']} batches, {res['compiles']} compiles (thread governor: lowered "
              f"{gov['lowered']}, restored {gov['restored']}), {res['graph_breaks']} graph breaks; "
              f"first step {res['first_step_s']['compiled']:.1f} s compiled ({res['first_step_s']['eager']:.2f} s "
              f"eager); from batch 3: {c['sum_s']:.2f} s compiled, {e['sum_s']:.2f} s eager, eager/compiled "
              f"x{res['eager_over_compiled']:.2f} (per batch: median x{res['paired_ratio']['median']:.2f} "
              f"[{res['paired_ratio']['q1']:.2f}, {res['paired_ratio']['q3']:.2f}]); "
              f"median step {c['median_ms']:.1f} ms [{c['q1_ms']:.1f}, "
              f"{c['q3_ms']:.1f}] compiled, {e['median_ms']:.1f} ms [{e['q1_ms']:.1f}, {e['q3_ms']:.1f}] eager",
              flush=True)
        results.append(res)
    meta = dict(num_nodes=args.num_nodes, avg_degree=args.avg_degree, features=args.features, fanouts=fanouts,
                batch_size=args.batch_size, prefetch=args.prefetch, device=str(args.device), edges=ds.graph.num_edges,
                build_s=build_s, quick=args.quick,
                torch=torch.__version__, python=platform.python_version(), machine=platform.machine(),
                threads=torch.get_num_threads(), cpu_count=os.cpu_count())
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(portable(dict(meta=meta, results=results)), f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
