"""Mini-batch training on a GPU: NeighborLoader(device="cuda") puts each batch there ahead of the
step (pinned host buffers, copies on a side stream, the training stream waiting on an event), and
x_in_place reads a pinned host feature table through unified addressing.

A few batches of GraphSAGE and GAT trained on CUDA must equal the same batches trained on the CPU
in float64 (losses and parameters to 1e-9), with the feature table gathered on the host, on the
GPU, or read in place from the GPU or from pinned host memory; the training stream may be any
stream. Skipped without a GPU or a CUDA build of Seastar; run by tests/gpu/run.sh.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from seastar import _C
from seastar.loader import NeighborLoader

import minibatch_steps  # tests/python, on the path through tests/gpu/conftest.py

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(not getattr(ss._C, "cuda_built", False), reason="Seastar was built without the CUDA backend"),
]

DEV = torch.device("cuda", 0)


def _data(n=3000, e=40000, f=16, classes=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    # a few hubs: rows longer than a warp, so the GPU's grouping differs from the CPU's
    dst = torch.cat([torch.randint(0, n, (e - 4000,), generator=gen), torch.randint(0, 4, (4000,), generator=gen)])
    ei = torch.stack([torch.randint(0, n, (e,), generator=gen), dst])
    graph = ss.Graph.from_edge_index(ei, num_nodes=n)
    x = torch.randn(n, f, generator=gen, dtype=torch.float64)
    y = torch.randint(0, classes, (n,), generator=gen)
    return graph, x, y


def _sage(f, classes):
    return minibatch_steps.sage(f, classes, hidden=16)


def _gat(f, classes):
    return minibatch_steps.gat(f, classes, hidden=16)


MODELS = {"sage": _sage, "gat": _gat}


def _train(loader, make, device, steps=4, classes=4):
    def check(batch):
        assert batch.y.device == device and batch.blocks[0].num_edges > 0

    return minibatch_steps.train(loader, make(loader.x.shape[1], classes).to(device), steps, check)


def _assert_same(a, b, tol=1e-9):
    minibatch_steps.assert_same_training(a, b, tol)


def _cpu_reference(graph, x, y, make, x_in_place=False):
    loader = NeighborLoader((graph, x, y), [10, 5], batch_size=256, prefetch=0, seed=11, x_in_place=x_in_place)
    return _train(loader, make, torch.device("cpu"))


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("prefetch", [0, 2])
def test_training_on_cuda_equals_cpu(model, prefetch):
    """Rows gathered on the host into pinned memory, copied on the side stream."""
    graph, x, y = _data()
    loader = NeighborLoader((graph, x, y), [10, 5], batch_size=256, prefetch=prefetch, seed=11, device="cuda")
    assert loader.pin_memory and loader.device == DEV
    _assert_same(_train(loader, MODELS[model], DEV), _cpu_reference(graph, x, y, MODELS[model]))


@pytest.mark.parametrize("model", list(MODELS))
def test_table_on_the_gpu_is_gathered_there(model):
    graph, x, y = _data()
    loader = NeighborLoader((graph, x.to(DEV), y.to(DEV)), [10, 5], batch_size=256, seed=11)
    assert loader.device == DEV  # taken from x
    _assert_same(_train(loader, MODELS[model], DEV), _cpu_reference(graph, x, y, MODELS[model]))


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("where", ["pinned host", "gpu"])
def test_x_in_place(model, where):
    """SAGE aggregates the table in place (through unified addressing when it is pinned host
    memory); GAT gathers its rows inside the layer, on the GPU."""
    graph, x, y = _data()
    table = x.pin_memory() if where == "pinned host" else x.to(DEV)
    loader = NeighborLoader((graph, table, y), [10, 5], batch_size=256, seed=11, device="cuda", x_in_place=True)
    got = _train(loader, MODELS[model], DEV)
    _assert_same(got, _cpu_reference(graph, x, y, MODELS[model], x_in_place=True))
    _assert_same(got, _cpu_reference(graph, x, y, MODELS[model]))


def test_training_on_a_side_stream_of_its_own():
    """The training stream is whatever stream is current when a batch is taken."""
    graph, x, y = _data()
    stream = torch.cuda.Stream(DEV)
    loader = NeighborLoader((graph, x, y), [10, 5], batch_size=256, prefetch=2, seed=11, device="cuda")
    with torch.cuda.stream(stream):
        got = _train(loader, _sage, DEV)
    torch.cuda.synchronize(DEV)
    _assert_same(got, _cpu_reference(graph, x, y, _sage))


def test_pinned_host_view_reads_the_table():
    _, x, _ = _data()
    pinned = x.pin_memory()
    view = _C.host_view_on(pinned, "cuda:0")
    assert view.device == DEV and view.data_ptr() == pinned.data_ptr()
    ids = torch.tensor([5, 0, 2999, 5], device=DEV)
    torch.testing.assert_close(view.index_select(0, ids).cpu(), x[ids.cpu()], rtol=0, atol=0)


def test_x_in_place_refuses_pageable_and_differentiable_tables():
    graph, x, y = _data()
    with pytest.raises(ValueError, match=r"pinned host memory: pass x.pin_memory\(\)"):
        NeighborLoader((graph, x, y), [4], device="cuda", x_in_place=True)
    with pytest.raises(ValueError, match="its gradient would be a device tensor"):
        NeighborLoader((graph, x.pin_memory().requires_grad_(), y), [4], device="cuda", x_in_place=True)
    with pytest.raises(ValueError, match="x is on cuda:0 but the loader's device is cpu"):
        NeighborLoader((graph, x.to(DEV), y), [4], device="cpu")
