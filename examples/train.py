#!/usr/bin/env python
"""Node classification with seastar.nn layers on Cora / Citeseer (the model zoo).

    python examples/train.py --model gcn --dataset cora
    python examples/train.py --model gat --dataset citeseer --seed 3 --json out.json

Every model uses the published recipe by default (see --help); any hyper-parameter can be
overridden. Model selection: the reported test accuracy is the one at the epoch with the best
validation accuracy (first epoch reaching it), the standard practice for the Planetoid split.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
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
except ImportError:  # run from a checkout: python examples/train.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import seastar as ss

import torch
import torch.nn.functional as F
from torch import nn

import seastar.nn as snn  # noqa: E402
from _common import check_arguments  # noqa: E402  (examples/, the script's folder)
from seastar.nn._utils import linear as snn_linear  # noqa: E402  (dense or sparse x @ W.T + b)

log = logging.getLogger("seastar.examples.train")

# Published recipes (Kipf & Welling 2017; Velickovic et al. 2018; PyG examples; Klicpera et al. 2019).
RECIPES = {
    "gcn": dict(hidden=16, dropout=0.5, lr=0.01, weight_decay=5e-4, heads=1, epochs=200),
    "gat": dict(hidden=8, dropout=0.6, lr=0.005, weight_decay=5e-4, heads=8, epochs=200),
    "sage": dict(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4, heads=1, epochs=200),
    "gin": dict(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4, heads=1, epochs=200),
    "appnp": dict(hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4, heads=1, epochs=200),
}


class GCN(nn.Module):
    """dropout -> GCNConv(F, hidden) -> ReLU -> dropout -> GCNConv(hidden, C)."""

    def __init__(self, f_in, hidden, classes, dropout, **_):
        super().__init__()
        self.dropout = dropout
        self.conv1, self.conv2 = snn.GCNConv(f_in, hidden), snn.GCNConv(hidden, classes)

    def forward(self, g, x):
        x = feature_dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(g, x))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(g, x)

    def param_groups(self, wd):  # weight decay on the first layer only, as in the original GCN
        return [dict(params=self.conv1.parameters(), weight_decay=wd),
                dict(params=self.conv2.parameters(), weight_decay=0.0)]


class GAT(nn.Module):
    """dropout -> GATConv(F, hidden, heads) -> ELU -> dropout -> GATConv(hidden*heads, C, 1 head, mean).

    Dropout p on the inputs of both layers and on the attention coefficients (PyG's Cora example)."""

    def __init__(self, f_in, hidden, classes, dropout, heads, **_):
        super().__init__()
        self.dropout = dropout
        self.conv1 = snn.GATConv(f_in, hidden, heads=heads, dropout=dropout)
        self.conv2 = snn.GATConv(hidden * heads, classes, heads=1, concat=False, dropout=dropout)

    def forward(self, g, x):
        x = feature_dropout(x, self.dropout, self.training)
        x = F.elu(self.conv1(g, x))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(g, x)


class SAGE(nn.Module):
    """dropout -> SAGEConv(F, hidden, mean) -> ReLU -> dropout -> SAGEConv(hidden, C, mean)."""

    def __init__(self, f_in, hidden, classes, dropout, **_):
        super().__init__()
        self.dropout = dropout
        self.conv1, self.conv2 = snn.SAGEConv(f_in, hidden, aggr="mean"), snn.SAGEConv(hidden, classes, aggr="mean")

    def forward(self, g, x):
        x = feature_dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(g, x))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(g, x)


def mlp(a, b, c):
    return nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, c))


class GIN(nn.Module):
    """dropout -> GINConv(MLP(F, hidden, hidden)) -> ReLU -> dropout -> GINConv(MLP(hidden, hidden, C))."""

    def __init__(self, f_in, hidden, classes, dropout, **_):
        super().__init__()
        self.dropout = dropout
        self.conv1 = snn.GINConv(mlp(f_in, hidden, hidden))
        self.conv2 = snn.GINConv(mlp(hidden, hidden, classes))

    def forward(self, g, x):
        x = feature_dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(g, x))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(g, x)


class APPNPNet(nn.Module):
    """dropout -> Linear(F, hidden) -> ReLU -> dropout -> Linear(hidden, C) -> APPNP(K=10, alpha=0.1)."""

    def __init__(self, f_in, hidden, classes, dropout, K=10, alpha=0.1, **_):
        super().__init__()
        self.dropout = dropout
        self.lin1, self.lin2 = nn.Linear(f_in, hidden), nn.Linear(hidden, classes)
        self.prop = snn.APPNP(K, alpha)

    def forward(self, g, x):
        x = feature_dropout(x, self.dropout, self.training)
        x = F.relu(snn_linear(x, self.lin1.weight, self.lin1.bias))
        x = F.dropout(x, self.dropout, self.training)
        return self.prop(g, self.lin2(x))


def feature_dropout(x, p, training):
    """Dropout on the input features; on a sparse x only the stored non-zeros are dropped (the
    zeros would stay zero anyway), as the original GCN's sparse_dropout."""
    if not x.is_sparse:
        return F.dropout(x, p, training)
    if not training or p == 0.0:
        return x
    return torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p, True), x.shape, is_coalesced=True)


MODELS = {"gcn": GCN, "gat": GAT, "sage": SAGE, "gin": GIN, "appnp": APPNPNet}


def parse_args(argv=None):
    recipes = "; ".join(f"{m}: " + ", ".join(f"{k}={v}" for k, v in r.items()) for m, r in RECIPES.items())
    p = argparse.ArgumentParser(
        description="Train a seastar.nn model on a Planetoid split. The reported test accuracy is the "
                    "test accuracy at the epoch with the best validation accuracy (model selection on "
                    "the validation set, the standard practice).",
        epilog=f"Defaults per model (published recipes): {recipes}. GCN applies weight decay to the "
               f"first layer only, as the original GCN. Epoch times are train steps (forward, backward, "
               f"optimizer); the first epoch includes tracing/compilation and is reported separately.")
    p.add_argument("--model", choices=sorted(MODELS), default="gcn")
    p.add_argument("--dataset", choices=["cora", "citeseer"], default="cora")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=None, help="default: the recipe's (200)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--hidden", type=int, default=None, help="hidden units (per head for GAT)")
    p.add_argument("--dropout", type=float, default=None, help="feature dropout (GAT: also attention dropout)")
    p.add_argument("--heads", type=int, default=None, help="GAT: attention heads of the first layer")
    p.add_argument("--backend", choices=["auto", "fused", "reference"], default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dense-features", action="store_true",
                   help="keep the input features dense (default: sparse COO, as the original GCN; the "
                        "model is the same, input dropout and x @ W are just cheaper)")
    p.add_argument("--json", metavar="PATH", default=None, help="write the results and all arguments here")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    args = p.parse_args(argv)
    for k, v in RECIPES[args.model].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    check_arguments(p, args, dict(epochs=1, hidden=1, heads=1, threads=1))
    if not args.lr > 0:
        p.error(f"--lr must be positive, got {args.lr}")
    if args.weight_decay < 0:
        p.error(f"--weight-decay must be at least 0, got {args.weight_decay}")
    check_device(p, args.device)
    return args


def check_device(parser, name):
    """``parser.error`` for a device torch does not know or that this machine does not have."""
    try:
        device = torch.device(name)
    except RuntimeError:
        parser.error(f"--device must be cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            parser.error(f"--device {name}: no CUDA device is available here (torch {torch.__version__}: "
                         f"torch.cuda.is_available() is False)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            parser.error(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        parser.error(f"--device must be cpu, cuda or cuda:N, got {name!r}")


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_everything(args.seed)
    device = torch.device(args.device)

    fused_ok = _fused_available(device) if args.backend != "reference" else None
    if args.backend == "auto" and fused_ok is False:
        log.warning("the fused backend is not available; vertex programs run on the reference backend")

    t_start = time.perf_counter()  # total time: loading, model construction and training
    ds = ss.datasets.load(args.dataset)
    g, x, y = ds.graph.to(device), ds.x.to(device), ds.y.to(device)
    if not args.dense_features:
        # the indices come from a coalesced tensor and are reused unchanged: opt out of re-checking
        torch.sparse.check_sparse_tensor_invariants.disable()
        x = x.to_sparse_coo().coalesce()
    masks = {k: getattr(ds, f"{k}_mask").to(device) for k in ("train", "val", "test")}

    model = MODELS[args.model](ds.num_features, args.hidden, ds.num_classes, args.dropout, heads=args.heads).to(device)
    snn.set_backend(model, args.backend)
    groups = model.param_groups(args.weight_decay) if hasattr(model, "param_groups") else \
        [dict(params=model.parameters(), weight_decay=args.weight_decay)]
    opt = torch.optim.Adam(groups, lr=args.lr)

    best = dict(val=-1.0, test=0.0, epoch=0)
    epoch_ms, history = [], []
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        opt.zero_grad()
        out = model(g, x)
        loss = F.cross_entropy(out[masks["train"]], y[masks["train"]])
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        ms = 1e3 * (time.perf_counter() - t0)
        epoch_ms.append(ms)

        model.eval()
        with torch.no_grad():
            pred = model(g, x).argmax(-1)
        acc = {k: (pred[m] == y[m]).float().mean().item() for k, m in masks.items()}
        if acc["val"] > best["val"]:
            best = dict(val=acc["val"], test=acc["test"], epoch=epoch)
        history.append(dict(epoch=epoch, loss=loss.item(), **acc, ms=ms))
        if not args.quiet:
            print(f"epoch {epoch:4d}  loss {loss.item():.4f}  train {acc['train']:.4f}  val {acc['val']:.4f}"
                  f"  time {ms:8.2f} ms", flush=True)

    total_s = time.perf_counter() - t_start
    rest = epoch_ms[1:]
    result = dict(
        test_acc=best["test"], best_val_acc=best["val"], best_epoch=best["epoch"],
        final_test_acc_last_epoch=history[-1]["test"],
        first_epoch_ms=epoch_ms[0], mean_epoch_ms=(sum(rest) / len(rest)) if rest else float("nan"),
        total_s=total_s, epochs=args.epochs, args=vars(args),
        torch_threads=torch.get_num_threads(), torch_version=torch.__version__, host=platform.node(),
        fused_available=fused_ok,
    )
    print(f"test accuracy {best['test']:.4f} (best val {best['val']:.4f} at epoch {best['epoch']}); "
          f"mean epoch {result['mean_epoch_ms']:.2f} ms (first epoch {epoch_ms[0]:.1f} ms, incl. tracing); "
          f"total {total_s:.2f} s", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


def _fused_available(device):
    """Whether the fused backend runs a small GCN propagation here (a probe, before timing starts)."""
    from seastar.nn.gcn_conv import weighted_sum
    g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2).to(device)
    try:
        weighted_sum(g, backend="fused", h=torch.ones(2, 4, device=device), w=torch.ones(2, 1, device=device))
        return True
    except NotImplementedError:
        return False
    except Exception as e:  # the probe is informational; the run itself reports real errors
        log.warning("fused backend probe failed: %s", e)
        return False


if __name__ == "__main__":
    main()
