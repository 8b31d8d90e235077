"""float16 / bfloat16 inputs and parameters: the layer computes in float32 and returns the input's
dtype.

The generated kernels are specialised for float32 and float64 only, and half-precision sums over
a hub's in-edges would lose most of their bits anyway, so ``float32_inside`` runs the layer's
forward on float32 copies of its low-precision inputs, parameters and buffers
(``torch.func.functional_call``; the casts are differentiable, so gradients reach the original
half-precision tensors in their own dtype) and casts floating outputs back to the dtype of the
first floating input. Layers whose inputs and parameters are float32 or float64 are untouched.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import torch

LOW = (torch.float16, torch.bfloat16)


def _first_float_dtype(obj) -> Optional[torch.dtype]:
    if isinstance(obj, torch.Tensor):
        return obj.dtype if obj.is_floating_point() else None
    if isinstance(obj, (list, tuple)):
        for o in obj:
            d = _first_float_dtype(o)
            if d is not None:
                return d
    if isinstance(obj, dict):
        return _first_float_dtype(list(obj.values()))
    return None


def _has_low(obj) -> bool:
    if isinstance(obj, torch.Tensor):
        return obj.dtype in LOW
    if isinstance(obj, (list, tuple)):
        return any(_has_low(o) for o in obj)
    if isinstance(obj, dict):
        return any(_has_low(o) for o in obj.values())
    return False


def _cast(obj, dtype: torch.dtype, only: tuple) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.dtype in only else obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # NamedTuple
        return type(obj)(*(_cast(o, dtype, only) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(o, dtype, only) for o in obj)
    if isinstance(obj, dict):
        return {k: _cast(v, dtype, only) for k, v in obj.items()}
    return obj


def float32_inside(forward):
    """Decorates a layer's ``forward``: low-precision inputs or parameters compute in float32."""
    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        if getattr(self, "_seastar_float32", False):
            return forward(self, *args, **kwargs)
        params = {n: p for n, p in self.named_parameters()
                  if not isinstance(p, torch.nn.parameter.UninitializedParameter)}
        buffers = dict(self.named_buffers())
        low_inputs = _has_low(args) or _has_low(kwargs)
        if not (low_inputs or any(p.dtype in LOW for p in params.values())
                or any(b.dtype in LOW for b in buffers.values())):
            return forward(self, *args, **kwargs)
        out_dtype = _first_float_dtype(args) or _first_float_dtype(kwargs)
        f32 = {n: t.float() if t.dtype in LOW else t for n, t in {**params, **buffers}.items()}
        object.__setattr__(self, "_seastar_float32", True)
        try:
            out = torch.func.functional_call(self, f32, _cast(args, torch.float32, LOW),
                                             _cast(kwargs, torch.float32, LOW), strict=False)
        finally:
            object.__setattr__(self, "_seastar_float32", False)
        if out_dtype in LOW:
            out = _cast(out, out_dtype, (torch.float32,))
        return out
    # a code object of its own per layer: torch.compile counts recompilations per code object, and
    # one shared wrapper would make every layer class count against one limit
    names = {"co_name": forward.__name__}
    if hasattr(wrapper.__code__, "co_qualname"):  # Python >= 3.11
        names["co_qualname"] = forward.__qualname__
    wrapper.__code__ = wrapper.__code__.replace(**names)
    return wrapper
