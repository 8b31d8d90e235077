"""A training step captured in a CUDA graph and replayed: Seastar's kernels run on torch's current
stream, allocate their work counters from torch's allocator and make no host synchronisation or
host-to-device copy once the graph's device copy exists, so ``torch.cuda.graph`` can capture
forward, backward and the optimizer step. The replays must give the parameters that the same
steps give eagerly (float64; the kernels are deterministic, so to rounding of the optimizer).
The test graph has hubs and SEASTAR_CUDA_HUB_DEGREE is lowered, so the traversals take the hub
path when this process emits the layers' kernels first. Skipped without a GPU; run by
tests/gpu/run.sh.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
import seastar.nn as snn

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(not getattr(ss._C, "cuda_built", False), reason="Seastar was built without the CUDA backend"),
]

DEV = torch.device("cuda", 0)


def _graph(n=2000, e=30000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    dst = torch.cat([torch.randint(0, n, (e - 3000,), generator=gen), torch.randint(0, 3, (3000,), generator=gen)])
    return ss.Graph.from_edge_index(torch.stack([torch.randint(0, n, (e,), generator=gen), dst]), num_nodes=n)


class Net(torch.nn.Module):
    def __init__(self, layer, f=32, classes=5):
        super().__init__()
        self.conv = snn.GATConv(f, f // 4, heads=4) if layer == "gat" else snn.GCNConv(f, f)
        self.out = torch.nn.Linear(f, classes)

    def forward(self, g, x):
        return self.out(torch.relu(self.conv(g, x)))


def _step(model, opt, g, x, y):
    opt.zero_grad(set_to_none=False)
    loss = F.cross_entropy(model(g, x), y)
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("layer", ["gcn", "gat"])
def test_a_captured_training_step_replays_as_eager_steps(layer, monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "64")
    torch.manual_seed(0)
    g = _graph()
    x = torch.randn(g.num_nodes, 32, dtype=torch.float64, device=DEV)
    y = torch.randint(0, 5, (g.num_nodes,), device=DEV)
    model = Net(layer).to(DEV, torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    # warm up on a side stream (kernels compiled and loaded, the graph copied to the device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _step(model, opt, g, x, y)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    eager = copy.deepcopy(model)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.05)

    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        static_loss = _step(model, opt, g, x, y)
    losses = []
    for _ in range(4):
        cuda_graph.replay()
        losses.append(static_loss.item())
    expected = [_step(eager, eager_opt, g, x, y).item() for _ in range(4)]
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected), rtol=1e-12, atol=1e-12)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12, msg=lambda m: f"{name}: {m}")
