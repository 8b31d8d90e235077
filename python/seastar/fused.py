"""The fused backend's Python side: whether the fused kernels run a call (and the one warning
when they do not), and running them; each traced signature (``_C.Signature``) owns its kernels.

CPU tensors run generated C++ (compiled by the host compiler on first use); CUDA tensors run
generated CUDA (compiled by NVRTC for the tensors' device, launched on torch's current stream)
when this build has the CUDA backend (``seastar._C.cuda_built``). Both are cached on disk (see
``_C.kernel_cache_dir()``); the C++ autograd function runs the forward kernels, and the backward
kernels when gradients flow.
"""
from __future__ import annotations

import logging
import warnings

from . import _C  # noqa: F401 (the types named in annotations)

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
    return compiled.kernels


class FallbackWarning(UserWarning):
    """A program ran on the reference backend (plain torch ops, slower, more memory) because the
    fused kernels cannot run it; shown once per program and reason."""


_warned = set()


def available(compiled, why: str, backend: str = "auto") -> bool:
    """Whether the fused kernels run a call, given why they cannot (``ProgramCore.prepare``'s
    answer; empty: they can); with ``backend="auto"``, a program that falls back to the
    reference backend says so once (a FallbackWarning, and the "seastar" logger)."""
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
    return compiled.run(graph._g, tensors)
