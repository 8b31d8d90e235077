"""How long torch's OpenMP threads spin after each parallel region: read, never set.

libgomp (torch's OpenMP) keeps every thread of a team spinning for a while after each parallel
region (``GOMP_SPINCOUNT``, 300,000 iterations by default) before it sleeps. On a machine whose
cores are shared with other processes, the spinning threads take the cores the next region's
threads need. Seastar's own kernels do not use OpenMP's teams (runtime/cpu/worker_pool.h), but
the dense torch ops of a model do. The setting is the process's, so Seastar leaves it to the
application: ``GOMP_SPINCOUNT=1000`` in the environment before torch is imported (the example
scripts do so) spins briefly, enough to hand over between back-to-back ops, then sleeps.
``python -m seastar`` shows the policy in force.
"""
from __future__ import annotations

import os


def describe() -> str:
    policy, spin = os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")
    if policy is None and spin is None:
        return "libgomp's default (spin 300000; GOMP_SPINCOUNT=1000 before torch loads shortens it)"
    return ", ".join(f"{k}={v}" for k, v in (("OMP_WAIT_POLICY", policy), ("GOMP_SPINCOUNT", spin)) if v)
