"""The fused backend's Python side: builds a ``_C.FusedProgram`` per traced signature and runs it.

CPU tensors run generated C++ (compiled by the host compiler on first use); CUDA tensors run
generated CUDA (compiled by NVRTC for the tensors' device, launched on torch's current stream)
when this build has the CUDA backend (``seastar._C.cuda_built``). Both are cached on disk (see
``_C.kernel_cache_dir()``); the C++ autograd function runs the forward kernels, and the backward
kernels when gradients flow.
"""
from __future__ import annotations

import logging

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

_warned_no_cuda = False


def _program(compiled) -> "_C.FusedProgram":
    if compiled.kernels is None:
        compiled.kernels = _C.FusedProgram(compiled.lowered)
        if compiled.kernels.unsupported:
            log.info("%s " + FALLBACK_MESSAGE + ": %s", compiled.lowered.name, compiled.kernels.unsupported)
    return compiled.kernels


def why_unavailable(compiled, tensors) -> str:
    devices = {t.device.type for t in tensors.values()}
    other = devices - {"cpu", "cuda"}
    if other:
        return f"the fused backend runs CPU and CUDA tensors, not {sorted(other)}"
    if "cuda" in devices and not getattr(_C, "cuda_built", False):
        return ("the tensors are on a CUDA device but this build of Seastar has no CUDA backend (it was built "
                "without the CUDA toolkit); rebuild with the toolkit installed, move the tensors to the CPU, "
                "or use backend='reference'")
    return _program(compiled).unsupported


def available(compiled, tensors) -> bool:
    why = why_unavailable(compiled, tensors)
    global _warned_no_cuda
    if why and not _warned_no_cuda and "no CUDA backend" in why:
        _warned_no_cuda = True
        log.warning("%s; CUDA tensors run on the reference backend", why.split(";")[0])
    return not why


def run(compiled, graph, tensors):
    names = list(compiled.names)
    return _C.fused_apply(_program(compiled), graph._g, names, compiled.bind(graph, tensors))
