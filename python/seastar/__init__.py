"""Seastar: vertex-centric GNN programs compiled to fused kernels.

A layer is a function of one vertex and its in-edges, compiled to fused forward and backward
kernels::

    import seastar as ss

    @ss.vertex_program
    def gcn(v):
        return sum(e.src.h * e.w for e in v.in_edges())

    out = gcn(graph, h=h, w=w)       # autograd-enabled torch.Tensor [N, F]
"""
from __future__ import annotations

import logging as _logging
import os as _os

import torch as _torch  # loads LibTorch before the extension that links against it

from ._torch_check import check_torch as _check_torch

__version__ = _check_torch(_torch.__version__)  # a clear error, before _C fails to load

from . import _C
from ._C import CompileError, TraceError
from ._cpu_allocator import cpu_allocator_stats, install_cpu_allocator, release_idle_cpu_memory
from ._cpu_allocator import install_from_env as _install_cpu_allocator_from_env

# Nothing process-wide changes at import unless the environment asks for it (docs/process.md: "What
# Seastar changes in the process"): torch's allocator, thread count and OpenMP settings stay.
_install_cpu_allocator_from_env()  # SEASTAR_CPU_ALLOCATOR=caching; ValueError for a bad value
from ._worker_pool import kernel_pool_stats
from ._thread_governor import set_thread_governor, thread_governor_stats

thread_governor_stats()  # ValueError now, not at the first launch, for a bad SEASTAR_THREAD_GOVERNOR (off by default)

from .graph import Graph
from . import ops
from .ops import *  # noqa: F401,F403 - sum, mean, max, min, softmax, dot and every public op of core/ir/ops.def
from .program import FallbackLog, FallbackWarning, VertexProgram, vertex_program
from .reorder import Reordered, reorder_graph
from . import torch_ops  # registers the ops and opaque types torch.compile and export need
from . import derived_graphs  # the op that derives graphs inside compiled code
from . import datasets, distributed, loader, nn, progress, reference

_logging.getLogger("seastar").addHandler(_logging.NullHandler())


def set_log_level(level: str) -> None:
    """Sets the level of both the Python logger "seastar" and the C++ (spdlog) logger."""
    _C.set_log_level(level.lower())
    py_level = {"trace": _logging.DEBUG, "off": _logging.CRITICAL + 1}.get(level.lower(), level.upper())
    _logging.getLogger("seastar").setLevel(py_level)


if _os.environ.get("SEASTAR_LOG_LEVEL"):
    try:
        set_log_level(_os.environ["SEASTAR_LOG_LEVEL"])
    except ValueError:
        pass


__all__ = [
    # programs and graphs
    "vertex_program", "VertexProgram", "Graph", "Reordered", "reorder_graph",
    # errors and fallbacks
    "CompileError", "TraceError", "FallbackLog", "FallbackWarning",
    # the vertex-program language (core/ir/ops.def's public ops and the aggregations)
    *ops.__all__,
    # process-wide switches, off unless called, and what they report
    "set_log_level", "set_thread_governor", "thread_governor_stats", "install_cpu_allocator",
    "cpu_allocator_stats", "release_idle_cpu_memory", "kernel_pool_stats",
    # the packages
    "datasets", "distributed", "loader", "nn",
]
