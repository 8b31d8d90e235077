"""The threads seastar's CPU kernels run on (``runtime/cpu/worker_pool.h``).

Each kernel's blocks are claimed from a shared counter by the calling thread and by helper
threads (the count ``torch.set_num_threads`` set, in all; the thread governor of
``_thread_governor.py`` lowers torch's own count on a busy machine, not this one). A helper descheduled in the middle of a block makes
the caller wait for it, so the pool judges every job it offers to helpers: after three in a row
that took longer than the caller alone would have (another process on the second core, or torch's
OpenMP threads spinning there after an op), kernels run on their caller alone for a while
(10 ms, doubling up to 1 s while the next offered job still loses).
"""
from __future__ import annotations

from . import _C


def kernel_pool_stats() -> dict:
    """Counters since the process started: jobs ``pooled`` (offered to helpers), of those the
    jobs ``lost`` (slower than the caller alone would have been), and jobs ``benched`` (run on the
    caller alone because helpers had lately lost)."""
    return dict(_C.kernel_pool_stats())
