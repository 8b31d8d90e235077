"""Which allocator torch's CPU tensors come from: torch's, unless the user installs Seastar's.

Seastar's caching allocator (``runtime/cpu/cpu_allocator.h``) keeps the pages of a freed tensor
of 1 MiB or more for the next request of about its size, so an epoch reuses the previous epoch's
memory instead of leaving holes in glibc's heap or faulting fresh pages in
(``benchmarks/results/`` has what it saves per model). It becomes torch's CPU allocator for every
tensor of the process, so it is installed only when the user asks: ``install_cpu_allocator()``,
or ``SEASTAR_CPU_ALLOCATOR=caching`` at ``import seastar``. Tensors that exist before the switch
keep their allocator, and there is no switching back.
"""
from __future__ import annotations

import os

from . import _C

ENV = "SEASTAR_CPU_ALLOCATOR"


def install_from_env() -> bool:
    """Installs the caching allocator if ``SEASTAR_CPU_ALLOCATOR=caching`` (ValueError for a
    value other than ``caching`` or ``torch``); returns whether it is in force."""
    return _C.install_cpu_allocator_from_env()


def install_cpu_allocator() -> bool:
    """Makes Seastar's caching allocator torch's CPU allocator for the rest of the process (the
    user's tensors included; call it before the model allocates). Returns whether it is in force
    (another allocator of higher priority may hold the place)."""
    return _C.install_caching_cpu_allocator()


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
        return "seastar's caching allocator (blocks of 1 MiB and up reused)"
    return f"torch's (seastar.install_cpu_allocator() or {ENV}=caching for seastar's caching allocator)"
