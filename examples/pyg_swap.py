#!/usr/bin/env python
"""A PyTorch Geometric model run on seastar.nn by changing its import (Cora, GAT).

    python examples/pyg_swap.py                      # seastar.nn's layers, PyG's calls
    python examples/pyg_swap.py --layers pyg         # the same model on PyG's layers
    python examples/pyg_swap.py --check              # PyG's weights in both: outputs must agree

The model is written the way PyG code is: ``conv(x, edge_index)`` with the dataset's edge_index
tensor (seastar builds its graph from it once and caches it). ``--check`` (needs PyG) loads one
model's state dict into the other and compares the forward and the gradients.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

try:
    import seastar as ss
except ImportError:  # run from a checkout: python examples/pyg_swap.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import seastar as ss


class GAT(torch.nn.Module):
    """PyG's GAT example: dropout -> GATConv(F, 8, heads=8) -> ELU -> dropout -> GATConv(64, C)."""

    def __init__(self, lib, f_in, classes, hidden=8, heads=8, dropout=0.6):
        super().__init__()
        self.dropout = dropout
        self.conv1 = lib.GATConv(f_in, hidden, heads=heads, dropout=dropout)
        self.conv2 = lib.GATConv(hidden * heads, classes, heads=1, concat=False, dropout=dropout)

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def load(name: str):
    return importlib.import_module("seastar.nn" if name == "seastar" else "torch_geometric.nn")


def check(data, edge_index) -> float:
    """PyG's model's weights in seastar's; the largest difference of outputs and gradients."""
    x = data.x.to_dense().double()
    models = {}
    for name in ("pyg", "seastar"):
        torch.manual_seed(0)
        models[name] = GAT(load(name), x.shape[1], data.num_classes).double().eval()
    models["seastar"].load_state_dict(models["pyg"].state_dict())
    outs, grads = {}, {}
    for name, m in models.items():
        out = m(x, edge_index)
        outs[name] = out
        grads[name] = torch.autograd.grad(out.square().sum(), list(m.parameters()))
    diff = (outs["pyg"] - outs["seastar"]).abs().max().item()
    for a, b in zip(grads["pyg"], grads["seastar"]):
        diff = max(diff, (a - b).abs().max().item())
    return diff


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", choices=["seastar", "pyg"], default="seastar")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch/OpenMP threads (0: torch's default)")
    p.add_argument("--check", action="store_true", help="compare with PyG's layers on the same weights")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = ss.datasets.load("cora")
    edge_index = data.graph.edge_index.long()  # one tensor for the whole run, as in PyG code
    if args.check:
        diff = check(data, edge_index)
        print(f"largest difference to PyG (float64, outputs and gradients): {diff:.2e}")
        if diff > 1e-10:
            raise SystemExit("seastar.nn differs from PyG")
    torch.manual_seed(args.seed)
    x = data.x.to_dense()
    model = GAT(load(args.layers), x.shape[1], data.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    best_val = test_at_best = 0.0
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, edge_index)[data.train_mask], data.y[data.train_mask])
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, edge_index).argmax(-1)
        val = (pred[data.val_mask] == data.y[data.val_mask]).float().mean().item()
        test = (pred[data.test_mask] == data.y[data.test_mask]).float().mean().item()
        if val > best_val:
            best_val, test_at_best = val, test
        print(f"epoch {epoch:3d}  loss {loss.item():.4f}  val {val:.3f}  test {test:.3f}  "
              f"{1e3 * (time.perf_counter() - t0):.1f} ms")
    print(f"{args.layers}: test accuracy at the best validation epoch {test_at_best:.3f}")


if __name__ == "__main__":
    main()
