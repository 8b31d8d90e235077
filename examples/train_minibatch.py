#!/usr/bin/env python
"""Mini-batch node classification with neighbour sampling (GraphSAGE, GCN, GAT, R-GCN or HGT).

    python examples/train_minibatch.py --model sage --dataset cora
    python examples/train_minibatch.py --model gcn --dataset cora --fanouts=-1,-1,-1 --layers 2 --subgraph
    python examples/train_minibatch.py --model gat --dataset synthetic --num-nodes 1000000 --fanouts 15,10
    python examples/train_minibatch.py --model rgcn --dataset planted --num-nodes 100000 --fanouts 10,10
    python examples/train_minibatch.py --model hgt --dataset planted --num-nodes 20000 --fanouts 10,10 --hidden 32 --lr 0.01 --epochs 15
    python examples/train_minibatch.py --model sage --dataset synthetic --device cuda --x-in-place

``--device cuda`` trains on the GPU: the loader gathers each batch's rows into pinned host memory
and copies the batch to the GPU on a side stream ahead of the step (NeighborLoader(device=...)).
``--features`` says where the feature table lives: ``host`` (pinned with ``--x-in-place`` on a
GPU, where the first layer reads it in place over the bus) or ``device`` (the whole table on the
GPU, rows gathered there).

``--dataset planted`` is a typed graph (ss.datasets.planted_typed_classification: a vertex's class
is written in the relations of its in-edges, and vertices have node types); its sampled blocks
keep their edge types and their sources' node types, and R-GCN (RGCNConv per layer) or HGT
(HGTConv per layer) trains on them.

``--model gcn`` trains GCNConv on the sampled blocks (normalised by the blocks' degrees, as DGL's
GraphConv) or, with ``--subgraph``, on PyG-style square subgraphs of the sampled vertices
(``NeighborLoader(subgraph=True)``; every model runs on them, and the loss reads the seeds' rows,
the first ``batch_size``). The evaluation is layer-wise on blocks of full neighbourhoods: for
GCN each chunk's block normalises by the degrees within it, the whole graph's when one chunk
holds every vertex (``--eval-batch-size`` at least the vertex count).

Each epoch samples blocks for batches of training vertices (ss.loader.NeighborLoader: the C++
sampler on a background thread, ahead of training) and runs the layers on them. The line per
epoch gives the loss, the train accuracy of the sampled batches, the validation accuracy
(layer-wise full-neighbourhood inference) and the epoch time split into the time training
waited for batches and the rest (compute). The test accuracy is the one at the best validation
epoch.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

# This script's choice, made before torch loads OpenMP: torch's threads spin briefly after each op,
# then sleep, so they do not take the cores a shared machine's other processes need (docs/process.md:
# "What Seastar changes in the process"). An exported GOMP_SPINCOUNT or OMP_WAIT_POLICY wins.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
try:
    import seastar as ss
except ImportError:  # run from a checkout: python examples/train_minibatch.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import seastar as ss

import torch
import torch.nn.functional as F
from torch import nn

import seastar.nn as snn  # noqa: E402

from _common import check_device  # noqa: E402  (examples/, the script's folder)

log = logging.getLogger("seastar.examples.train_minibatch")


class SAGE(nn.Module):
    """SAGEConv(F, hidden, mean) -> ReLU -> dropout -> ... -> SAGEConv(hidden, C)."""

    def __init__(self, f_in, hidden, classes, layers, dropout, heads):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(snn.SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, blocks, x):
        for i, (conv, g) in enumerate(zip(self.convs, blocks)):
            x = conv(g, x)
            if i + 1 < len(self.convs):
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x

    def between(self, i, h):  # what runs between layers in layer-wise inference (eval mode)
        return F.relu(h)


class GCN(nn.Module):
    """GCNConv(F, hidden) -> ReLU -> dropout -> ... -> GCNConv(hidden, C)."""

    def __init__(self, f_in, hidden, classes, layers, dropout, heads):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(snn.GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    forward = SAGE.forward
    between = SAGE.between


class GAT(nn.Module):
    """GATConv(F, hidden, heads) -> ELU -> dropout -> ... -> GATConv(hidden*heads, C, 1 head)."""

    def __init__(self, f_in, hidden, classes, layers, dropout, heads):
        super().__init__()
        convs = []
        d = f_in
        for i in range(layers):
            last = i + 1 == layers
            convs.append(snn.GATConv(d, classes if last else hidden, heads=1 if last else heads, concat=not last))
            d = hidden * heads
        self.convs = nn.ModuleList(convs)
        self.dropout = dropout

    def forward(self, blocks, x):
        for i, (conv, g) in enumerate(zip(self.convs, blocks)):
            x = conv(g, x)
            if i + 1 < len(self.convs):
                x = F.dropout(F.elu(x), self.dropout, self.training)
        return x

    def between(self, i, h):
        return F.elu(h)


class RGCN(nn.Module):
    """RGCNConv(F, hidden, R) -> ReLU -> dropout -> ... -> RGCNConv(hidden, C, R), on typed blocks."""

    def __init__(self, f_in, hidden, classes, layers, dropout, heads, num_relations=1, aggr="add"):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(snn.RGCNConv(a, b, num_relations, aggr=aggr) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    forward = SAGE.forward
    between = SAGE.between


class HGT(nn.Module):
    """HGTConv(F, hidden, T, R, heads) -> ReLU -> dropout -> ... -> HGTConv(hidden, C, T, R, 1 head),
    on blocks that carry node and edge types."""

    def __init__(self, f_in, hidden, classes, layers, dropout, heads, num_node_types=1, num_relations=1):
        super().__init__()
        dims = [f_in] + [hidden] * (layers - 1) + [classes]
        self.convs = nn.ModuleList(
            snn.HGTConv(a, b, num_node_types, num_relations, heads=heads if i + 1 < layers else 1)
            for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.dropout = dropout

    forward = SAGE.forward
    between = SAGE.between


MODELS = {"sage": SAGE, "gcn": GCN, "gat": GAT, "rgcn": RGCN, "hgt": HGT}
TYPED_MODELS = ("rgcn", "hgt")
TYPED_DATASETS = ("planted",)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="sage")
    p.add_argument("--dataset", choices=["cora", "citeseer", "synthetic", "planted"], default="cora",
                   help="planted: a typed graph (for --model rgcn or hgt)")
    p.add_argument("--num-nodes", type=int, default=100_000, help="synthetic: vertices")
    p.add_argument("--avg-degree", type=float, default=20.0, help="synthetic: edges per vertex")
    p.add_argument("--num-features", type=int, default=100, help="synthetic: feature width")
    p.add_argument("--num-classes", type=int, default=10, help="synthetic, planted: classes")
    p.add_argument("--relations", type=int, default=6, help="planted: edge types")
    p.add_argument("--aggr", choices=["add", "mean"], default="add", help="rgcn: aggregation per relation")
    p.add_argument("--fanouts", default="25,10", help="neighbours sampled per hop from the seeds, e.g. 15,10 (-1: all)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4, help="GAT heads of the hidden layers")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--eval-batch-size", type=int, default=8192)
    p.add_argument("--prefetch", type=int, default=2, help="batches sampled ahead on the loader thread (0: inline)")
    p.add_argument("--x-in-place", action="store_true",
                   help="the first layer reads the feature table through global source ids (nothing gathered per "
                        "batch; SAGE reads it in place, GAT gathers inside the layer); untyped datasets")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--features", choices=["host", "device"], default="host",
                   help="where the feature table lives: host (pinned with --x-in-place on a GPU, read in place over "
                        "the bus) or device (the whole table on --device, rows gathered there)")
    p.add_argument("--layers", type=int, default=0,
                   help="graph layers (default: one per fanout; with --subgraph any number, e.g. one fewer than "
                        "the hops for GCN)")
    p.add_argument("--subgraph", action="store_true",
                   help="train on square subgraphs of the sampled vertices (PyG's NeighborLoader) instead of blocks; "
                        "every layer sees the same graph (one more hop than layers makes GCN exact at the seeds "
                        "with full fanouts)")
    p.add_argument("--threads", type=int, default=0, help="torch/OpenMP threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", help="write the result here")
    args = p.parse_args(argv)
    try:
        args.fanouts = [int(f) for f in args.fanouts.split(",")]
    except ValueError:
        p.error(f"--fanouts must be comma-separated integers, got {args.fanouts!r}")
    if any(f < -1 for f in args.fanouts):
        p.error("--fanouts: each fanout must be >= 0, or -1 for every neighbour")
    for name in ("epochs", "batch_size", "hidden", "heads", "eval_batch_size", "num_nodes", "num_features"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.num_classes < 2:
        p.error(f"--num-classes must be at least 2, got {args.num_classes}")
    if args.relations < 1:
        p.error(f"--relations must be at least 1, got {args.relations}")
    if (args.model in TYPED_MODELS) != (args.dataset in TYPED_DATASETS):
        p.error("--model rgcn and hgt train on a typed graph (--dataset planted), and a typed graph needs one of them")
    if args.model == "hgt" and args.hidden % args.heads:
        p.error(f"--hidden ({args.hidden}) must be divisible by --heads ({args.heads}) for HGT")
    if not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.x_in_place and args.dataset in TYPED_DATASETS:
        p.error("--x-in-place needs a graph without node types (its blocks' node types are their sources')")
    if args.layers < 0:
        p.error(f"--layers must be at least 1, got {args.layers}")
    args.layers = args.layers or len(args.fanouts)
    if not args.subgraph and args.layers != len(args.fanouts):
        p.error(f"--layers ({args.layers}) must equal the number of fanouts ({len(args.fanouts)}) on blocks "
                f"(one block per layer); --subgraph runs any number of layers on one graph")
    if args.x_in_place and args.subgraph:
        p.error("--x-in-place reads the input block's sources in place; --subgraph yields no blocks")
    if args.prefetch < 0 or args.threads < 0:
        p.error("--prefetch and --threads must be >= 0")
    check_device(p, args.device)
    return args


def load(args):
    if args.dataset == "planted":
        t0 = time.perf_counter()
        ds = ss.datasets.planted_typed_classification(
            args.num_nodes, int(args.num_nodes * args.avg_degree), 3, args.relations, args.num_classes,
            args.num_features, seed=args.seed)
        log.info("generated typed graph: %d vertices, %d edges, %d relations in %.1f s", ds.graph.num_nodes,
                 ds.graph.num_edges, ds.graph.num_edge_types, time.perf_counter() - t0)
        return ds
    if args.dataset == "synthetic":
        t0 = time.perf_counter()
        ds = ss.datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree,
                                                       num_classes=args.num_classes,
                                                       num_features=args.num_features, seed=args.seed)
        log.info("generated synthetic graph: %d vertices, %d edges in %.1f s", ds.graph.num_nodes,
                 ds.graph.num_edges, time.perf_counter() - t0)
        return ds
    ds = ss.datasets.load(args.dataset)
    if ds.x.is_sparse:
        ds.x = ds.x.to_dense()
    return ds


@torch.no_grad()
def evaluate(model, ds, batch_size, device="cpu", x=None):
    model.eval()
    x = ds.x if x is None else x
    out = ss.loader.layerwise_inference(model.convs, ds.graph, x, batch_size, between=model.between, device=device)
    pred = out.argmax(-1).cpu()
    return {k: (pred[m] == ds.y[m]).float().mean().item() for k, m in
            (("train", ds.train_mask), ("val", ds.val_mask), ("test", ds.test_mask))}


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    ds = load(args)
    typed = {}
    if args.model == "rgcn":
        typed = dict(num_relations=ds.graph.num_edge_types, aggr=args.aggr)
    elif args.model == "hgt":
        typed = dict(num_node_types=ds.graph.num_node_types, num_relations=ds.graph.num_edge_types)
    device = torch.device(args.device)
    model = MODELS[args.model](ds.x.shape[1], args.hidden, ds.num_classes, args.layers, args.dropout, args.heads,
                               **typed).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    x = ds.x
    if args.features == "device":
        x = x.to(device)
    elif device.type == "cuda" and args.x_in_place:
        x = x.contiguous().pin_memory()  # read in place by the GPU through unified addressing
    loader = ss.loader.NeighborLoader((ds.graph, x, ds.y), num_neighbors=args.fanouts, batch_size=args.batch_size,
                                      input_nodes=ds.train_mask, shuffle=True, seed=args.seed, prefetch=args.prefetch,
                                      x_in_place=args.x_in_place, subgraph=args.subgraph, device=device)
    log.info("%s on %s: %d vertices, %d edges, %d training seeds in %d batches of %d, fanouts %s, %d threads, "
             "device %s (features on the %s)", args.model, args.dataset, ds.graph.num_nodes, ds.graph.num_edges,
             int(ds.train_mask.sum()), len(loader), args.batch_size, args.fanouts, torch.get_num_threads(), device,
             args.features)
    best = {"val": -1.0}
    history = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        # summed on the device: reading a number back each step would make the host wait for the GPU
        total_loss = torch.zeros((), dtype=torch.float64, device=device)
        correct = torch.zeros((), dtype=torch.long, device=device)
        count = 0
        for batch in ss.progress.bar(loader, desc=f"epoch {epoch}", disable=args.no_progress):
            opt.zero_grad()
            if args.subgraph:  # every layer on the one subgraph; the seeds are its first rows
                out = model([batch.graph] * len(model.convs), batch.x)[:batch.batch_size]
            else:
                out = model(batch.blocks, batch.x)
            loss = F.cross_entropy(out, batch.y)
            loss.backward()
            opt.step()
            total_loss += loss.detach() * batch.batch_size
            correct += (out.argmax(-1) == batch.y).sum()
            count += batch.batch_size
        total_loss, correct = total_loss.item(), int(correct)  # waits for the epoch's last step
        epoch_s = time.perf_counter() - t0
        wait_s, sample_s = loader.stats["wait_s"], loader.stats["sample_s"]
        acc = evaluate(model, ds, args.eval_batch_size, device, x if args.features == "device" else ds.x)
        row = dict(epoch=epoch, loss=total_loss / count, train_batches_acc=correct / count, val=acc["val"],
                   test=acc["test"], epoch_s=epoch_s, sampling_s=sample_s, waited_s=wait_s,
                   compute_s=epoch_s - wait_s, seeds_per_s=count / epoch_s)
        history.append(row)
        if acc["val"] > best["val"]:
            best = dict(row)
        print(f"epoch {epoch:3d}  loss {row['loss']:.4f}  train(batches) {row['train_batches_acc']:.3f}  "
              f"val {acc['val']:.3f}  test {acc['test']:.3f}  epoch {epoch_s * 1e3:.0f} ms "
              f"(sampling {sample_s * 1e3:.0f} ms on the loader thread, waited {wait_s * 1e3:.0f} ms, "
              f"compute {(epoch_s - wait_s) * 1e3:.0f} ms)  {row['seeds_per_s']:.0f} seeds/s", flush=True)
    # the first epoch traces and compiles every layer's kernels: reported apart, as train.py does
    later = history[1:] or history
    print(f"test accuracy {best['test']:.4f} at the best validation epoch {best['epoch']} (val {best['val']:.4f}); "
          f"mean epoch {sum(r['epoch_s'] for r in later) / len(later) * 1e3:.0f} ms "
          f"(first epoch {history[0]['epoch_s'] * 1e3:.0f} ms, incl. tracing and compiling)")
    result = dict(args=vars(args), best=best, history=history)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
