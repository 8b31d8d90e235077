#!/usr/bin/env python
"""Node classification on a typed graph with R-GCN and HGT (seastar.nn.RGCNConv / HGTConv).

    python examples/hetero_node_classification.py                  # both models
    python examples/hetero_node_classification.py --model hgt --json out.json

Data: ``seastar.datasets.planted_typed_classification``: a node's class is written in the
relation types of its in-edges (each class has a signature of two relations), the features are
mostly noise (a weak class direction), node types carry no signal. A feature-only model stays near
chance; a relational model recovers the class from the relation histogram of the in-edges.

Models (full-batch, Adam, cross-entropy on the training nodes; the reported test accuracy is the
one at the epoch with the best validation accuracy):

* rgcn: RGCNConv(F, hidden, R, aggr) -> ReLU -> dropout -> RGCNConv(hidden, C, R, aggr). The
  default ``aggr="add"`` sums messages per relation, so the per-relation edge counts (the planted
  signal) reach the classifier; ``--aggr mean`` averages per relation and keeps only which
  relations occur.
* hgt: Linear(F, hidden) -> ReLU -> HGTConv(hidden, hidden, T, R, heads) -> HGTConv(hidden,
  hidden, T, R, heads) -> Linear(hidden, C). The attention averages relation-typed messages,
  so the relation mix of the in-edges reaches the classifier.
"""
from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

try:
    import seastar as ss
except ImportError:  # run from a checkout: python examples/hetero_node_classification.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import seastar as ss
import seastar.nn as snn  # noqa: E402
from seastar import FallbackLog  # noqa: E402
from _common import check_arguments, start_run, write_json  # noqa: E402  (examples/, the script's folder)

log = logging.getLogger("seastar.examples.hetero_node_classification")


class RGCN(nn.Module):
    def __init__(self, f_in, hidden, classes, num_relations, dropout, aggr, bases, mode, **_):
        super().__init__()
        self.dropout = dropout
        self.conv1 = snn.RGCNConv(f_in, hidden, num_relations, num_bases=bases, aggr=aggr, mode=mode)
        self.conv2 = snn.RGCNConv(hidden, classes, num_relations, num_bases=bases, aggr=aggr, mode=mode)

    def forward(self, g, x):
        h = F.relu(self.conv1(g, x))
        h = F.dropout(h, self.dropout, self.training)
        return self.conv2(g, h)


class HGT(nn.Module):
    def __init__(self, f_in, hidden, classes, num_relations, dropout, num_node_types, heads, mode, **_):
        super().__init__()
        self.dropout = dropout
        self.lin_in = nn.Linear(f_in, hidden)
        self.conv1 = snn.HGTConv(hidden, hidden, num_node_types, num_relations, heads=heads, mode=mode)
        self.conv2 = snn.HGTConv(hidden, hidden, num_node_types, num_relations, heads=heads, mode=mode)
        self.lin_out = nn.Linear(hidden, classes)

    def forward(self, g, x):
        h = F.relu(self.lin_in(x))
        h = self.conv1(g, h)
        h = F.dropout(h, self.dropout, self.training)
        h = self.conv2(g, h)
        return self.lin_out(h)


MODELS = {"rgcn": RGCN, "hgt": HGT}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["rgcn", "hgt", "both"], default="both")
    p.add_argument("--nodes", type=int, default=3000)
    p.add_argument("--edges", type=int, default=30000)
    p.add_argument("--node-types", type=int, default=3)
    p.add_argument("--relations", type=int, default=6)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--heads", type=int, default=2, help="HGT heads")
    p.add_argument("--aggr", choices=["add", "mean"], default="add", help="R-GCN aggregation per relation")
    p.add_argument("--bases", type=int, default=None, help="R-GCN basis matrices (default: none)")
    p.add_argument("--mode", choices=["auto", "per_edge", "per_pair"], default="auto")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--backend", choices=["auto", "fused", "reference"], default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", metavar="PATH", default=None)
    p.add_argument("--quiet", action="store_true")
    return check_arguments(p, p.parse_args(argv), dict(nodes=1, edges=0, node_types=1, relations=1, classes=2,
                                                       features=1, epochs=1, hidden=1, heads=1, bases=1,
                                                       threads=1))


def train_one(name, args, ds):
    torch.manual_seed(args.seed)
    g, x, y = ds.graph, ds.x, ds.y
    model = MODELS[name](ds.num_features, args.hidden, ds.num_classes, ds.num_edge_types, args.dropout,
                         aggr=args.aggr, bases=args.bases, mode=args.mode, num_node_types=ds.num_node_types,
                         heads=args.heads)
    snn.set_backend(model, args.backend)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    masks = dict(train=ds.train_mask, val=ds.val_mask, test=ds.test_mask)
    best = dict(val=-1.0, test=0.0, epoch=0)
    epoch_ms = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(g, x)[masks["train"]], y[masks["train"]])
        loss.backward()
        opt.step()
        epoch_ms.append(1e3 * (time.perf_counter() - t0))
        model.eval()
        with torch.no_grad():
            pred = model(g, x).argmax(-1)
        acc = {k: (pred[m] == y[m]).float().mean().item() for k, m in masks.items()}
        if acc["val"] > best["val"]:
            best = dict(val=acc["val"], test=acc["test"], epoch=epoch)
        if not args.quiet:
            print(f"{name:4s} epoch {epoch:4d}  loss {loss.item():.4f}  train {acc['train']:.4f}  "
                  f"val {acc['val']:.4f}  time {epoch_ms[-1]:8.2f} ms", flush=True)
    rest = epoch_ms[1:]
    mean_ms = sum(rest) / len(rest) if rest else epoch_ms[0]
    mode = getattr(model.conv1, "last_mode", None) or model.conv1.choose_mode(g)
    print(f"{name}: test accuracy {best['test']:.4f} (best val {best['val']:.4f} at epoch {best['epoch']}; "
          f"chance {1.0 / ds.num_classes:.4f}); mean epoch {mean_ms:.1f} ms (first {epoch_ms[0]:.1f} ms); "
          f"path {mode}", flush=True)
    return dict(test_acc=best["test"], best_val_acc=best["val"], best_epoch=best["epoch"],
                mean_epoch_ms=mean_ms, first_epoch_ms=epoch_ms[0], path=mode)


def main(argv=None):
    args = parse_args(argv)
    fallbacks = FallbackLog()
    start_run(args, fallbacks)
    t_start = time.perf_counter()
    ds = ss.datasets.planted_typed_classification(
        args.nodes, args.edges, args.node_types, args.relations, args.classes, args.features, seed=args.seed)
    names = ["rgcn", "hgt"] if args.model == "both" else [args.model]
    results = {name: train_one(name, args, ds) for name in names}
    result = dict(models=results, chance=1.0 / ds.num_classes, num_nodes=args.nodes, num_edges=args.edges,
                  total_s=time.perf_counter() - t_start, reference_fallbacks=fallbacks.messages,
                  fused=not fallbacks.messages and args.backend != "reference", args=vars(args),
                  torch_threads=torch.get_num_threads(), torch_version=torch.__version__, host=platform.node())
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
