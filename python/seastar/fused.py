"""The fused backend's Python side: builds a ``_C.FusedProgram`` per traced signature and runs it.

CPU tensors run generated C++ (compiled by the host compiler on first use); CUDA tensors run
generated CUDA (compiled by NVRTC for the tensors' device, launched on torch's current stream)
when this build has the CUDA backend (``seastar._C.cuda_built``). Both are cached on disk (see
``_C.kernel_cache_dir()``); the C++ autograd function runs the forward kernels, and the backward
kernels when gradients flow.
"""
from __future__ import annotations

import logging
import warnings

import torch

from . import _C

log = logging.getLogger("seastar")
FALLBACK_MESSAGE = "runs on the reference backend"


class FallbackLog(logging.Handler):
    """Collects the programs that ran on the reference backend instead of fused kernels.

    ``logging.getLogger("seastar").addHandler(h := FallbackLog())`` (with the logger at INFO),
    then ``h.messages`` lists each fallback once, with its reason."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        msg = record.getMessage()
        if FALLBACK_MESSAGE in msg and msg not in self.messages:
            self.messages.append(msg)

def _program(compiled) -> "_C.FusedProgram":
    if compiled.kernels is None:
        compiled.kernels = _C.FusedProgram(compiled.lowered)
    return compiled.kernels


def why_unavailable(compiled, tensors) -> str:
    devices = {t.device.type for t in tensors.values()}
    other = devices - {"cpu", "cuda"}
    if other:
        return f"the fused backend runs CPU and CUDA tensors, not {sorted(other)}"
    dtypes = {t.dtype for t in tensors.values() if t.is_floating_point()} - {torch.float32, torch.float64}
    if dtypes:
        return f"the fused kernels compute in float32 and float64, not {sorted(map(str, dtypes))}"
    if "cuda" in devices and not getattr(_C, "cuda_built", False):
        return ("the tensors are on a CUDA device but this build of Seastar has no CUDA backend (it was built "
                "without the CUDA toolkit); rebuild with the toolkit installed, move the tensors to the CPU, "
                "or use backend='reference'")
    return _program(compiled).unsupported


class FallbackWarning(UserWarning):
    """A program ran on the reference backend (plain torch ops, slower, more memory) because the
    fused kernels cannot run it; shown once per program and reason."""


_warned = set()


def available(compiled, tensors, backend: str = "auto") -> bool:
    """Whether the fused kernels run this call; with ``backend="auto"``, a program that falls
    back to the reference backend says so once (a FallbackWarning, and the "seastar" logger)."""
    why = why_unavailable(compiled, tensors)
    if why and backend == "auto":
        name = compiled.lowered.name
        if "no CUDA backend" in why:
            name, why = "CUDA tensors", why.split(";")[0]  # one warning for every program
        if (name, why) not in _warned:
            _warned.add((name, why))
            warnings.warn(f"seastar: {name} {FALLBACK_MESSAGE}: {why}", FallbackWarning, stacklevel=3)
            log.info("%s " + FALLBACK_MESSAGE + ": %s", name, why)
    return not why


def run(compiled, graph, tensors):
    names = list(compiled.names)
    return _C.fused_apply(_program(compiled), graph._g, names, compiled.bind(graph, tensors))
