"""A few mini-batch training steps of a two-layer model, for tests that compare training paths.

A helper module (not a test file), shared by tests/python/test_loader_device.py (the loader's
device path against the plain one, on the CPU and through the CUDA emulator) and
tests/gpu/test_minibatch_cuda.py (training on a GPU against the CPU).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F

import seastar.nn as snn


def sage(f: int, classes: int, hidden: int = 8) -> torch.nn.ModuleList:
    torch.manual_seed(0)
    return torch.nn.ModuleList([snn.SAGEConv(f, hidden), snn.SAGEConv(hidden, classes)]).double()


def gat(f: int, classes: int, hidden: int = 8) -> torch.nn.ModuleList:
    torch.manual_seed(0)
    return torch.nn.ModuleList([snn.GATConv(f, hidden // 2, heads=2), snn.GATConv(hidden, classes)]).double()


def train(loader, convs: torch.nn.ModuleList, steps: int = 4,
          check: Optional[Callable] = None) -> Tuple[torch.Tensor, List[torch.Tensor]]:
    """``steps`` SGD steps over the loader's first batches (``check(batch)`` on each); the losses
    and the parameters after them, on the CPU."""
    opt = torch.optim.SGD(convs.parameters(), lr=0.1)
    losses = []
    for i, batch in enumerate(loader):
        if i == steps:
            break
        if check is not None:
            check(batch)
        opt.zero_grad()
        h = batch.x
        for j, (conv, block) in enumerate(zip(convs, batch.blocks)):
            h = conv(block, h)
            if j + 1 < len(convs):
                h = F.relu(h)
        loss = F.cross_entropy(h, batch.y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).to("cpu", copy=True), [p.detach().to("cpu", copy=True) for p in convs.parameters()]


def assert_same_training(a, b, tol: float) -> None:
    torch.testing.assert_close(a[0], b[0], rtol=tol, atol=tol)
    for p, q in zip(a[1], b[1]):
        torch.testing.assert_close(p, q, rtol=tol, atol=tol)
