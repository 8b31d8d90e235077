"""Mini-batch training under ``torch.compile`` on a GPU: the CPU suite's loop
(tests/python/test_compile_minibatch.py) with the batches put on the device by the loader.

GraphSAGE, GAT, R-GCN and HGT compile once for 30 batches of different sizes (``dynamic=None``,
``fullgraph=True``, no graph break), and the loss and every gradient equal an eager copy on the
same device in float64, batch by batch. With Inductor (Triton kernels for the dense work around
Seastar's) for GraphSAGE too. Skipped without a GPU or a CUDA build of Seastar; run by
tests/gpu/run.sh.
"""
from __future__ import annotations

import copy

import pytest
import torch

import seastar as ss
from seastar.loader import NeighborLoader

import test_compile_minibatch as cpu  # tests/python, on the path through tests/gpu/conftest.py

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(not getattr(ss._C, "cuda_built", False), reason="Seastar was built without the CUDA backend"),
]

DEV = torch.device("cuda", 0)
BATCHES = 30
TOL = dict(rtol=1e-9, atol=1e-9)  # Inductor's fused elementwise may round otherwise than eager's


@pytest.mark.parametrize("name,backend", [("sage", "counting"), ("gat", "counting"), ("rgcn", "counting"),
                                          ("hgt", "counting"), ("sage", "inductor")])
def test_loader_training_on_cuda_compiles_once_and_equals_eager(name, backend):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    graph, x, y = cpu._data()
    torch.manual_seed(0)
    eager = cpu.MODELS[name]().to(cpu.DT).to(DEV)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, fullgraph=True, backend=cpu.CountingBackend() if backend == "counting" else backend)
    loader = NeighborLoader((graph, x, y), [4, 3], batch_size=cpu.BATCH, seed=1, device=DEV)
    cpu.train_side_by_side(compiled, eager, loader, BATCHES, tol=TOL, device=DEV)
