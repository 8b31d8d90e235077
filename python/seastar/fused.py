"""The fused backend's Python side: builds a ``_C.FusedProgram`` per traced signature and runs it.

Generated C++ is compiled on first use (cached on disk, see ``_C.kernel_cache_dir()``); the
C++ autograd function runs the forward kernels, and the backward kernels when gradients flow.
"""
from __future__ import annotations

import logging

from . import _C

log = logging.getLogger("seastar")


def _program(compiled) -> "_C.FusedProgram":
    if compiled.kernels is None:
        compiled.kernels = _C.FusedProgram(compiled.lowered)
        if compiled.kernels.unsupported:
            log.info("%s runs on the reference backend: %s", compiled.lowered.name, compiled.kernels.unsupported)
    return compiled.kernels


def why_unavailable(compiled, tensors) -> str:
    if any(t.device.type != "cpu" for t in tensors.values()):
        return "the fused backend of this build runs CPU tensors only"
    return _program(compiled).unsupported


def available(compiled, tensors) -> bool:
    return not why_unavailable(compiled, tensors)


def run(compiled, graph, tensors):
    names = list(compiled.names)
    return _C.fused_apply(_program(compiled), graph._g, names, [tensors[k] for k in names])
