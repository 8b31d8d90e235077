"""Backward nodes that would keep a projection ``h = lin(x)`` keep the recipe instead.

A layer that projects its input and then runs a program over the projection (GATConv:
``h = x W``, then the attention) has ``h`` saved twice for backward (by the program and by the
product with the attention vectors), so an ``N x H*C`` tensor lives from forward to backward
while ``x``, which ``lin``'s own backward keeps anyway, could give it again with one product.
Inside ``recomputed_projection(lin, x, h)``, a tensor saved for backward that is ``h`` or a view
of it is packed as the recipe; the first backward node to need it computes ``lin(x)`` again,
and the nodes after it share that tensor until the graph is freed. Trade-off: one GEMM of
``x`` per backward pass for ``N*H*C`` floats less at the peak.

Not used under ``torch.compile`` (which traces saved tensors itself) or without gradients.
``x`` or ``lin``'s weight modified in place before backward is refused there, as autograd
refuses a modified saved tensor; so is any other tensor saved inside the context, whose version
autograd does not check once it passes through hooks.
"""
from __future__ import annotations

import contextlib
from typing import NamedTuple, Optional, Tuple

import torch

from ._utils import linear


def recomputed_projection(lin: torch.nn.Module, x: torch.Tensor, h: torch.Tensor):
    """A context (``torch.autograd.graph.saved_tensors_hooks``, which may be entered more than
    once) in which tensors saved for backward that share ``h``'s storage are recomputed from
    ``lin(x)``; a null context where that cannot act."""
    if (torch.compiler.is_compiling() or not torch.is_grad_enabled() or not h.requires_grad
            or h.layout != torch.strided or h._base is not None or not h.is_contiguous()):
        return contextlib.nullcontext()
    recipe = _Recipe(lin, x, h)  # referenced by the hooks only: freed with the saved tensors
    return torch.autograd.graph.saved_tensors_hooks(recipe.pack, recipe.unpack)


class _Recipe:
    def __init__(self, lin: torch.nn.Module, x: torch.Tensor, h: torch.Tensor):
        # the tensors lin computed h from, not lin itself: under float32_inside (functional_call)
        # lin holds float32 copies of its parameters only while forward runs
        self._x, self._weight, self._bias = x, lin.weight, lin.bias
        self._storage = h.untyped_storage().data_ptr()
        self._versions = self._current_versions()
        self._again: Optional[torch.Tensor] = None

    def _current_versions(self):
        return tuple(t._version for t in (self._x, self._weight, self._bias) if t is not None)

    def pack(self, t: torch.Tensor):
        if t.layout != torch.strided or t.untyped_storage().data_ptr() != self._storage:
            # autograd checks no versions of tensors saved through hooks: check them here
            return _Kept(t, t._version)
        return _View(t.size(), t.stride(), t.storage_offset())

    def unpack(self, packed):
        if isinstance(packed, _Kept):
            if packed.tensor._version != packed.version:
                raise RuntimeError(_MODIFIED + f": a tensor of shape {tuple(packed.tensor.shape)} saved for "
                                   f"backward is at version {packed.tensor._version}, expected {packed.version}")
            return packed.tensor
        if self._again is None:
            if self._current_versions() != self._versions:
                raise RuntimeError(_MODIFIED + ": the input or the weight of a projection seastar recomputes in "
                                   "backward (see seastar/nn/_recompute.py)")
            with torch.no_grad():
                self._again = linear(self._x, self._weight, self._bias)
        return self._again.as_strided(packed.size, packed.stride, packed.offset)


_MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


class _Kept(NamedTuple):
    tensor: torch.Tensor
    version: int


class _View(NamedTuple):
    size: torch.Size
    stride: Tuple[int, ...]
    offset: int
