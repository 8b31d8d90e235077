"""NeighborLoader(device=..., pin_memory=...): batches put on the training device ahead of the step.

Without a GPU this checks the structure of the transfer (seastar/_batch_transfer.py) with a
recording stand-in for the CUDA streams and torch's ``meta`` device standing in for the GPU
(every tensor a batch carries is moved, each moved tensor is recorded on the stream that waited
for the copies, the copies are issued inside the side stream and the event after them), the
options' validation, and that training through the device path (on the CPU, and with the
kernels' generated CUDA run by the host emulator) equals training without it in float64.
tests/gpu/test_minibatch_cuda.py runs the same on a GPU.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
from seastar import _batch_transfer, _C
from seastar.loader import NeighborLoader, sample_blocks

import minibatch_steps

META = torch.device("meta")


def _data(n=300, e=2400, f=6, classes=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ei = torch.stack([torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)])
    graph = ss.Graph.from_edge_index(ei, num_nodes=n)
    x = torch.randn(n, f, generator=gen, dtype=torch.float64)
    y = torch.randint(0, classes, (n,), generator=gen)
    return graph, x, y


class RecordingStreams:
    """The CUDA streams' part of the transfer, logged: what runs inside the side stream, the
    events, the waits and the tensors recorded on the training stream."""

    def __init__(self):
        self.log, self.kept, self.inside = [], [], False

    def side(self):
        @contextlib.contextmanager
        def on_side():
            self.log.append("enter side")
            self.inside = True
            yield
            self.inside = False
            self.log.append("leave side")
        return on_side()

    def follow_current(self):
        self.log.append("follow current")

    def record(self):
        assert self.inside, "the event must be recorded on the side stream, after the copies"
        self.log.append("record")
        return f"event{sum(1 for e in self.log if e == 'record')}"

    def wait(self, event):
        self.log.append(("wait", event))
        return "training stream"

    def keep(self, t, stream):
        self.kept.append((t, stream))


def _batch(graph, x, y, seeds, hops=(4, 3), in_place=False):
    b = sample_blocks(graph, seeds, list(hops), seed=1)
    if in_place:
        b.blocks[0] = b.blocks[0].with_global_sources(b.input_nodes, graph.num_nodes)
    b.x = None if x is None else (x if in_place else x.index_select(0, b.input_nodes))
    b.y = None if y is None else y.index_select(0, b.seed_nodes)
    return b


def _ids(ts):
    return {id(t) for t in ts}


# ---- the structure of the transfer ------------------------------------------------------------

def test_every_tensor_of_a_batch_moves_and_is_recorded_on_the_training_stream():
    graph, x, y = _data()
    streams = RecordingStreams()
    transfer = _batch_transfer.BatchTransfer(META, None, None, streams=streams)
    b = _batch(graph, x, y, torch.arange(20))
    item = transfer.start(b)
    assert streams.log == ["enter side", "record", "leave side"]
    moved = [b.x, b.y, b.input_nodes, b.seed_nodes]
    assert all(t.device == META for t in moved)
    for i, block in enumerate(b.blocks):
        arrays = block._g.tensors("meta", coo=False, out=False)
        # the out-edge index too (a backward into the sources reads it); on the CPU not the input
        # block's, sorted only when something reads it (on a GPU also the input block's)
        assert {"in_ptr", "in_nbr"} <= set(arrays) and ("out_ptr" in arrays) == (i > 0)
        moved += list(arrays.values())
    assert _ids(moved) <= _ids(item.allocated)
    assert streams.kept == []  # nothing recorded before the training thread takes the batch
    got = transfer.finish(item)
    assert got is b and streams.log[-1] == ("wait", "event1")
    assert _ids(t for t, _ in streams.kept) == _ids(item.allocated)
    assert {s for _, s in streams.kept} == {"training stream"}


def test_a_subgraph_batch_moves_its_square_graph_and_gathers_on_the_device():
    """subgraph=True batches hold one square graph and no blocks: the graph's index arrays move
    (both directions: every layer reads it, forward and backward) and a device table is
    gathered there by the batch's vertices."""
    from seastar.loader import sample_subgraph
    graph, x, y = _data()
    streams = RecordingStreams()
    transfer = _batch_transfer.BatchTransfer(META, x.to(META), y.to(META), streams=streams)
    b = sample_subgraph(graph, torch.arange(20), [4, 3], seed=1)
    assert not b.blocks and b.graph is not None and b.x is None
    item = transfer.start(b)
    arrays = b.graph._g.tensors("meta", coo=False, out=True)
    assert {"in_ptr", "in_nbr", "out_ptr", "out_nbr"} <= set(arrays)
    assert _ids(arrays.values()) <= _ids(item.allocated)
    assert b.x.device == META and b.x.shape == (b.input_nodes.numel(), x.shape[1])
    assert b.y.device == META and b.y.shape == (b.seed_nodes.numel(),)


def test_a_table_on_the_device_is_gathered_there():
    """x and y on the device: the batch's rows are index_select'ed there (the GPU-side gather)."""
    graph, x, y = _data()
    transfer = _batch_transfer.BatchTransfer(META, x.to(META), y.to(META), streams=RecordingStreams())
    b = _batch(graph, None, None, torch.arange(30))
    item = transfer.start(b)
    assert b.x.device == META and b.x.shape == (b.input_nodes.numel(), x.shape[1])
    assert b.y.device == META and b.y.shape == (30,)
    assert _ids([b.x, b.y]) <= _ids(item.allocated)


def test_x_in_place_moves_the_source_ids_and_both_blocks_but_no_rows():
    graph, x, y = _data()
    table = x.to(META)
    transfer = _batch_transfer.BatchTransfer(META, table, None, streams=RecordingStreams())
    b = _batch(graph, table, None, torch.arange(25), in_place=True)
    item = transfer.start(b)
    assert b.x is table  # the table itself, nothing gathered
    assert b.blocks[0].source_ids.device == META
    local = b.blocks[0].local_block._g.tensors("meta", coo=False, out=False)
    assert "out_ptr" not in b.blocks[0]._g.tensors("meta", coo=False, out=False)  # a row per table row
    assert _ids([b.blocks[0].source_ids, *local.values()]) <= _ids(item.allocated)


def test_the_loader_waits_for_each_batch_before_handing_it_out():
    graph, x, y = _data()
    for prefetch in (0, 2):
        loader = NeighborLoader((graph, x, y), [4, 3], batch_size=40, device="cpu", prefetch=prefetch, seed=3)
        streams = RecordingStreams()
        loader._transfer.streams = streams
        for i, b in enumerate(loader):
            assert streams.log[0] == "follow current"  # the side stream follows the training stream first
            waits = [e for e in streams.log if isinstance(e, tuple)]
            assert len(waits) == i + 1 and waits[-1] == ("wait", f"event{i + 1}")
            assert streams.log.count("record") >= i + 1  # its copies were issued before
        assert len(waits) == len(loader)


def test_cpu_device_keeps_the_tensors_and_pins_nothing():
    graph, x, y = _data()
    loader = NeighborLoader((graph, x, y), [4, 3], batch_size=64, device="cpu", seed=0)
    assert loader.device == torch.device("cpu") and loader.pin_memory is False
    plain = NeighborLoader((graph, x, y), [4, 3], batch_size=64, seed=0)
    assert plain.device is None
    for a, b in zip(loader, plain):
        torch.testing.assert_close(a.x, b.x, rtol=0, atol=0)
        torch.testing.assert_close(a.y, b.y, rtol=0, atol=0)
        assert a.input_nodes.device.type == "cpu"


def test_gather_rows_into_plain_memory_equals_index_select():
    _, x, _ = _data()
    ids = torch.tensor([5, 0, 17, 5])
    torch.testing.assert_close(_batch_transfer.gather_rows(x, ids, pin=False), x[ids], rtol=0, atol=0)


# ---- options and their errors -------------------------------------------------------------------

@pytest.mark.parametrize("device, message", [
    ("tpu", "device must be 'cpu', 'cuda' or 'cuda:N'"),
    ("cuda:x", "device must be 'cpu', 'cuda' or 'cuda:N'"),
    ("meta", "(a meta device)"),
])
def test_bad_device_is_a_clear_error(device, message):
    graph, x, y = _data()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        NeighborLoader((graph, x, y), [2], device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_is_a_clear_error():
    graph, x, y = _data()
    with pytest.raises(ValueError, match="device='cuda': no CUDA device is available here"):
        NeighborLoader((graph, x, y), [2], device="cuda")
    with pytest.raises(ValueError, match="pin_memory=True needs CUDA"):
        NeighborLoader((graph, x, y), [2], pin_memory=True)


def test_pin_memory_must_be_a_bool():
    graph, x, y = _data()
    with pytest.raises(TypeError, match="pin_memory must be True, False or None, got 'yes'"):
        NeighborLoader((graph, x, y), [2], pin_memory="yes")


def test_a_table_on_another_device_is_named():
    graph, x, y = _data()
    with pytest.raises(ValueError, match="x is on meta but the loader's device is cpu"):
        NeighborLoader((graph, x.to(META), y), [2], device="cpu")


def test_x_in_place_on_a_gpu_needs_a_pinned_contiguous_table_without_gradient():
    """Checked before any CUDA call, so the messages are testable without a GPU."""
    _, x, _ = _data()
    cuda0 = torch.device("cuda", 0)
    with pytest.raises(ValueError, match=r"needs x in pinned host memory: pass x.pin_memory\(\)"):
        _batch_transfer.table_for_device("x", x, cuda0, True)
    with pytest.raises(ValueError, match="x must be contiguous"):
        _batch_transfer.table_for_device("x", x.t(), cuda0, True)
    assert _batch_transfer.table_for_device("x", x, cuda0, False) is x  # gathered on the host instead
    assert _batch_transfer.table_for_device("x", x, torch.device("cpu"), True) is x


def test_host_view_refuses_what_it_cannot_view():
    _, x, _ = _data()
    with pytest.raises(ValueError, match=r"a CUDA device with an index \(cuda:N\), got cuda"):
        _C.host_view_on(x, "cuda")
    with pytest.raises(ValueError, match="got cpu"):
        _C.host_view_on(x, "cpu")
    with pytest.raises(ValueError, match="must be in \\(pinned\\) host memory, but it is on meta"):
        _C.host_view_on(x.to(META), "cuda:0")
    with pytest.raises(ValueError, match="must be dense"):
        _C.host_view_on(x.to_sparse(), "cuda:0")


def test_host_view_is_the_same_memory_on_the_device():
    """The view's address, sizes and strides are the host tensor's (no CUDA call is made)."""
    _, x, _ = _data()
    cols = x[:, 1:4]
    view = _C.host_view_on(cols, "cuda:0")
    assert view.device == torch.device("cuda", 0)
    assert view.data_ptr() == cols.data_ptr()
    assert view.shape == cols.shape and view.stride() == cols.stride() and view.dtype == cols.dtype
    assert not view.requires_grad


# ---- the training step through the device path equals the one without it (float64) -------------

def _train(loader, make, steps=4):
    return minibatch_steps.train(loader, make(loader.x.shape[1], int(loader.y.max()) + 1), steps)


def _assert_same_training(a, b, tol=1e-12):
    minibatch_steps.assert_same_training(a, b, tol)


@pytest.mark.parametrize("make", [minibatch_steps.sage, minibatch_steps.gat], ids=["sage", "gat"])
@pytest.mark.parametrize("x_in_place", [False, True])
def test_training_through_the_device_path_equals_training_without(make, x_in_place):
    graph, x, y = _data()
    base = _train(NeighborLoader((graph, x, y), [5, 4], batch_size=50, prefetch=0, seed=7), make)
    for prefetch in (0, 2):
        loader = NeighborLoader((graph, x, y), [5, 4], batch_size=50, prefetch=prefetch, seed=7, device="cpu",
                                x_in_place=x_in_place)
        _assert_same_training(_train(loader, make), base)


@pytest.mark.parametrize("make", [minibatch_steps.sage, minibatch_steps.gat], ids=["sage", "gat"])
@pytest.mark.parametrize("x_in_place", [False, True])
def test_emulated_cuda_kernels_train_as_the_cpu_kernels(monkeypatch, make, x_in_place):
    """The mini-batch step's generated CUDA (SAGE reading x in place through global source ids or
    gathered rows, GAT gathering inside the layer), run by the host emulator through the loader's
    device path."""
    graph, x, y = _data(n=200, e=1200)
    base = _train(NeighborLoader((graph, x, y), [4, 3], batch_size=40, prefetch=0, seed=5), make, steps=2)
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    loader = NeighborLoader((graph, x, y), [4, 3], batch_size=40, prefetch=2, seed=5, device="cpu",
                            x_in_place=x_in_place)
    _assert_same_training(_train(loader, make, steps=2), base, tol=1e-10)


def test_layerwise_inference_on_a_named_device_equals_the_default():
    graph, x, _ = _data()
    convs = minibatch_steps.sage(x.shape[1], 3)
    a = ss.loader.layerwise_inference(convs, graph, x, batch_size=64, between=lambda i, h: F.relu(h))
    b = ss.loader.layerwise_inference(convs, graph, x, batch_size=64, between=lambda i, h: F.relu(h), device="cpu")
    torch.testing.assert_close(a, b, rtol=0, atol=0)
