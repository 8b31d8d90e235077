"""How long torch's OpenMP threads spin after each parallel region, set before torch loads.

libgomp (torch's OpenMP) keeps every thread of a team spinning for a while after each parallel
region (``GOMP_SPINCOUNT``, 300,000 iterations by default) before it sleeps. On a machine whose
cores are shared with other processes, the spinning threads take the cores the next region's
threads need, and two threads end up several times slower than one. Seastar's own kernels do
not use OpenMP's teams (runtime/cpu/worker_pool.h), but the dense torch ops of a model do. libgomp
reads its settings once, when it is loaded, so this can only act when ``seastar`` is imported
before ``torch``: then, unless the user chose a policy (``OMP_WAIT_POLICY`` or
``GOMP_SPINCOUNT`` set), threads spin briefly (enough to hand over between back-to-back ops)
and then sleep. ``python -m seastar`` shows the policy in force.
"""
from __future__ import annotations

import os
import sys

SPIN_COUNT = "1000"


def set_short_spin() -> str:
    """Sets the short spin if it can still take effect; returns what is in force."""
    user_set = "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ
    if not user_set and "torch" not in sys.modules:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return describe()


def describe() -> str:
    policy, spin = os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")
    if policy is None and spin is None:
        return "libgomp's default (spin 300000; import seastar before torch to shorten it)"
    return ", ".join(f"{k}={v}" for k, v in (("OMP_WAIT_POLICY", policy), ("GOMP_SPINCOUNT", spin)) if v)
