"""Mini-batches onto the training device ahead of the step (``NeighborLoader(device=...)``).

The loader thread gathers a batch's rows of ``x`` and ``y`` into pinned host memory, then issues
the batch's host-to-device copies (its blocks' index arrays, the rows, the ids; ``src_nodes``
and ``edge_ids`` stay on the host) with
``non_blocking=True`` on a side CUDA stream and records an event after them. The training thread,
when it takes the batch, makes its current stream wait for that event (a dependency between
streams: the host does not wait) and ``record_stream``s every tensor the side stream allocated,
so the caching allocator does not hand that memory to the side stream again before the training
stream's kernels that read it have run. Nothing in a step synchronises the host with the GPU.

Pinned staging memory comes from torch's host allocator, which keeps a block from reuse until
the copies reading it have completed, so the host buffers may die as soon as the copies are
issued.

On the CPU the same path runs with no stream, no event and no copy (``_HostStreams``), so the
structure is exercised where there is no GPU.
"""
from __future__ import annotations

import contextlib
from typing import List, Optional

import torch

from . import _C


def resolve_device(device) -> Optional[torch.device]:
    """``device`` as a ``torch.device`` (a CUDA one with its index), None for None; ValueError
    naming the value for a device this machine cannot train on."""
    if device is None:
        return None
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' (or a torch.device), got {device!r}") from None
    if d.type == "cpu":
        return torch.device("cpu")
    if d.type != "cuda":
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r} (a {d.type} device)")
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: no CUDA device is available here (torch {torch.__version__}: "
                         f"torch.cuda.is_available() is False)")
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if d.index is None else d.index
    if index >= count:
        raise ValueError(f"device={device!r}: this machine has {count} CUDA device(s)")
    return torch.device("cuda", index)


def resolve_pin_memory(pin_memory, device: Optional[torch.device]) -> bool:
    """torch DataLoader's ``pin_memory``: None means pinned exactly when batches go to a CUDA device."""
    if pin_memory is None:
        return device is not None and device.type == "cuda"
    if not isinstance(pin_memory, bool):
        raise TypeError(f"pin_memory must be True, False or None, got {pin_memory!r}")
    if pin_memory and not torch.cuda.is_available():
        raise ValueError("pin_memory=True needs CUDA (pinned memory is page-locked for CUDA copies), but "
                         "torch.cuda.is_available() is False here; leave pin_memory unset")
    return pin_memory


def table_for_device(name: str, t: Optional[torch.Tensor], device: Optional[torch.device], in_place: bool):
    """The tensor a batch reads ``name`` (the loader's ``x``) from on ``device``: ``t`` itself, or
    for ``x_in_place`` with ``t`` in pinned host memory and a CUDA device, a CUDA view of it read
    through unified addressing (runtime/engine/host_view.h). ValueError naming what is wrong otherwise."""
    if t is None or device is None:
        return t
    if t.device.type == "cuda" and t.device != device:
        raise ValueError(f"{name} is on {t.device} but the loader's device is {device}: move {name} to {device} "
                         f"or keep it on the CPU")
    if t.device.type == "cuda" or device.type == "cpu" or not in_place:
        return t
    if not t.is_contiguous():
        raise ValueError(f"x_in_place=True with a host {name} on {device}: {name} must be contiguous (the kernels "
                         f"would otherwise copy the whole table to the GPU); pass {name}.contiguous().pin_memory()")
    if not t.is_pinned():
        raise ValueError(f"x_in_place=True with device={str(device)!r} reads {name} where it lies, through unified "
                         f"addressing, which needs {name} in pinned host memory: pass {name}.pin_memory(), or "
                         f"{name}.to({str(device)!r}) when it fits on the GPU (or x_in_place=False to gather rows "
                         f"on the host)")
    if t.requires_grad:
        raise ValueError(f"x_in_place=True with a pinned host {name} on {device}: its gradient would be a "
                         f"device tensor as large as the table; pass {name}.detach() (input features need no "
                         f"gradient), or keep {name} on the GPU")
    return _C.host_view_on(t, str(device))


def gather_rows(t: torch.Tensor, ids: torch.Tensor, pin: bool) -> torch.Tensor:
    """``t[ids]`` on the host: into pinned memory when ``pin`` (the copy to the device then runs
    behind the host), else into the loader's recycled buffers. A sparse table is gathered
    unpinned (its copy then waits for the host)."""
    if not pin or t.layout != torch.strided:
        return _C.gather_rows(t, ids)
    out = torch.empty((ids.numel(),) + tuple(t.shape[1:]), dtype=t.dtype, pin_memory=True)
    return torch.index_select(t, 0, ids, out=out)


class _HostStreams:
    """No stream, no event: batches stay where they are (the CPU path)."""

    def side(self):
        return contextlib.nullcontext()

    def follow_current(self) -> None:
        pass

    def record(self):
        return None

    def wait(self, event):
        return None

    def keep(self, t: torch.Tensor, stream) -> None:
        pass


class _CudaStreams:
    """One side stream on ``device`` for the copies; the training stream waits on events."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stream = torch.cuda.Stream(device=device)

    def side(self):
        return torch.cuda.stream(self.stream)

    def follow_current(self) -> None:
        self.stream.wait_stream(torch.cuda.current_stream(self.device))

    def record(self):
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def wait(self, event):
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        return current

    def keep(self, t: torch.Tensor, stream) -> None:
        t.record_stream(stream)


class InFlight:
    """A batch whose copies were issued: the event after them and the tensors they allocated."""

    __slots__ = ("batch", "event", "allocated")

    def __init__(self, batch, event, allocated: List[torch.Tensor]):
        self.batch, self.event, self.allocated = batch, event, allocated


class BatchTransfer:
    """Issues a MiniBatch's copies to ``device`` (``start``, on the loader thread) and hands it
    to the training stream (``finish``, on the training thread)."""

    def __init__(self, device: Optional[torch.device], x_table: Optional[torch.Tensor], y: Optional[torch.Tensor],
                 streams=None):
        self.device = device
        self.x_table, self.y = x_table, y  # device-resident tables are gathered on the device
        if streams is None:
            streams = _CudaStreams(device) if device is not None and device.type == "cuda" else _HostStreams()
        self.streams = streams

    def begin(self) -> None:
        """Called on the training thread before an epoch's first copy: the side stream's work
        then follows what the training stream has queued so far (a table the GPU is still
        writing, e.g. ``x`` computed or copied there just before), without the host waiting."""
        self.streams.follow_current()

    def start(self, batch) -> InFlight:
        if self.device is None:
            return InFlight(batch, None, [])
        allocated: List[torch.Tensor] = []
        dev = self.device

        def move(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
            if t is None or t.device == dev:
                return t
            moved = t.to(dev, non_blocking=True)
            allocated.append(moved)
            return moved

        with self.streams.side():
            for i, block in enumerate(batch.blocks):
                # the input block's out-edge index only on a GPU, where building it inside the
                # backward (a layer projecting before it aggregates, GAT) would wait for a copy
                allocated.extend(_graph_to(block, dev, move, out=i > 0 or dev.type == "cuda"))
            if batch.graph is not None:  # subgraph=True: one square graph, every layer reads it
                allocated.extend(_graph_to(batch.graph, dev, move, out=True))
            batch.input_nodes, batch.seed_nodes = move(batch.input_nodes), move(batch.seed_nodes)
            in_place = bool(batch.blocks) and batch.blocks[0].sources_global
            if batch.x is None and self.x_table is not None and self.x_table.device == dev and \
                    not in_place:  # the GPU-side gather: x lives on the device
                batch.x = _record(allocated, self.x_table.index_select(0, batch.input_nodes))
            else:
                batch.x = move(batch.x)
            if batch.y is None and self.y is not None and self.y.device == dev:
                batch.y = _record(allocated, self.y.index_select(0, batch.seed_nodes))
            else:
                batch.y = move(batch.y)
            event = self.streams.record()
        return InFlight(batch, event, allocated)

    def finish(self, item: InFlight):
        stream = self.streams.wait(item.event)
        for t in item.allocated:
            self.streams.keep(t, stream)
        return item.batch


def _record(allocated: List[torch.Tensor], t: torch.Tensor) -> torch.Tensor:
    allocated.append(t)
    return t


def _graph_to(block, device: torch.device, move, out: bool) -> List[torch.Tensor]:
    """``block``'s index arrays on ``device``, copied without blocking: the in-edge index, and
    with ``out`` the out-edge index (a backward into the block's sources reads it); with global
    sources also its local twin and the source ids, but never the global block's own out-edge
    index, which would have a row per table row (nothing reads it without a gradient into the
    table). Returns the device tensors, which the training stream records."""
    allocated: List[torch.Tensor] = []
    for g in (block, block.local_block):
        if g is None:
            continue
        g_out = out and not g.sources_global
        arrays = g._g.tensors(str(device), coo=False, out=g_out, non_blocking=True)
        if device.type != "cpu":
            allocated.extend(t for t in arrays.values() if isinstance(t, torch.Tensor))
    if block.local_block is not None:
        block._local = (block._local[0], move(block._local[1]))
    return allocated
