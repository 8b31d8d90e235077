"""Which allocator torch's CPU tensors come from.

At import seastar makes its caching allocator (``runtime/cpu/cpu_allocator.h``) torch's CPU
allocator: a freed tensor of 1 MiB or more keeps its pages for the next request of about its
size, so an epoch reuses the previous epoch's memory instead of leaving holes in glibc's heap
(which roughly doubles a training process's footprint) or faulting fresh pages in.
``SEASTAR_CPU_ALLOCATOR=torch`` keeps torch's own allocator. Tensors that exist before the
switch keep theirs.
"""
from __future__ import annotations

import os

from . import _C

ENV = "SEASTAR_CPU_ALLOCATOR"


def install() -> bool:
    """Installs the caching allocator unless ``SEASTAR_CPU_ALLOCATOR=torch`` (ValueError for a
    value other than ``caching`` or ``torch``); returns whether it is in force."""
    return _C.install_cpu_allocator_from_env()


def cpu_allocator_stats() -> dict:
    """The caching CPU allocator's counters: ``installed``, ``live_bytes`` / ``idle_bytes`` (its
    blocks in use / kept for reuse), ``peak_live_bytes``, ``idle_blocks``, and how many requests
    ``reused`` an idle block or ``mapped`` a new one, and how many idle blocks were ``unmapped``."""
    return dict(_C.cpu_allocator_stats())


def release_idle_cpu_memory() -> None:
    """Gives the blocks the caching CPU allocator keeps for reuse back to the system."""
    _C.release_idle_cpu_blocks()


def describe() -> str:
    s = cpu_allocator_stats()
    if s["installed"]:
        return f"seastar's caching allocator (blocks of 1 MiB and up reused; {ENV}=torch for torch's)"
    return f"torch's ({ENV}={os.environ.get(ENV, '')!r})" if os.environ.get(ENV) else "torch's"
