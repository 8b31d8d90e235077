"""The backend a vertex-program call runs on, for eager and compiled calls alike: the choice
(``runs_fused``), the warning and log line of a fallback to the reference backend, and the
capture of the signatures calls run (``capture_signatures``)."""
from __future__ import annotations

import contextlib
import logging
import warnings
from typing import TYPE_CHECKING, Dict, List

if TYPE_CHECKING:  # pragma: no cover
    from . import _C

log = logging.getLogger("seastar")

BACKENDS = ("auto", "fused", "reference")
FALLBACK_MESSAGE = "runs on the reference backend"


class FallbackWarning(UserWarning):
    """A program ran on the reference backend (plain torch ops, slower, more memory) because the
    fused kernels cannot run it; shown once per program and reason."""


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


_warned = set()


def runs_fused(compiled: "_C.Signature", why: str, backend: str) -> bool:
    """The backend choice, for eager calls and compiled code alike: whether the fused kernels run
    a call, given why they cannot (empty: they can). ``backend="fused"`` raises
    NotImplementedError when they cannot; ``"auto"`` falls back to the reference backend and says
    so once per program and reason (a FallbackWarning, and the "seastar" logger)."""
    if backend == "reference":
        return False
    if not why:
        return True
    if backend == "fused":
        raise NotImplementedError(why)
    name = compiled.lowered.name
    if "no CUDA backend" in why:
        name, why = "CUDA tensors", why.split(";")[0]  # one warning for every program
    if (name, why) not in _warned:
        _warned.add((name, why))
        warnings.warn(f"seastar: {name} {FALLBACK_MESSAGE}: {why}", FallbackWarning, stacklevel=3)
        log.info("%s " + FALLBACK_MESSAGE + ": %s", name, why)
    return False


class SignatureCapture:
    """The signatures eager calls ran on the fused kernels (with ``run_fused=False``: the calls
    that asked for them), in order of their first call (``capture_signatures``)."""

    def __init__(self, run_fused: bool):
        self.run_fused = run_fused
        self.programs: List[tuple] = []  # (name, signature)
        self.calls: Dict[int, tuple] = {}  # id(signature) -> the graph and tensors of its first call

    def _record(self, compiled, graph, tensors):
        if id(compiled) not in self.calls:
            self.programs.append((compiled.lowered.name, compiled))
            self.calls[id(compiled)] = (graph, dict(tensors))


_captures: List[SignatureCapture] = []


@contextlib.contextmanager
def capture_signatures(run_fused: bool = True):
    """Records the signature of every eager vertex-program call inside the block (for the GPU
    models and the CUDA codegen tests, which inspect every kernel a model runs). With
    ``run_fused=False`` the calls run on the reference backend, so that nothing is compiled."""
    capture = SignatureCapture(run_fused)
    _captures.append(capture)
    try:
        yield capture
    finally:
        _captures.remove(capture)
