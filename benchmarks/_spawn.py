"""Runs one benchmark configuration in its own process and reads the JSON object it prints last.

Every benchmark script that measures configurations one per process uses it (``run.py``,
``bench_minibatch.py``, ``bench_rgcn.py``). The others start processes for another purpose:
``bench_distributed.py`` launches ``torch.distributed.run`` (a world of ranks, not one
configuration), ``bench_threads.py`` starts the spinning load its measurements run beside, and
``kernel_variants.py`` runs the C++ compiler; ``bench_compile.py`` measures in one process on
purpose (first-call against later calls). The child gets ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` = its thread count, may run under another
interpreter (the DGL peer's environment, ``_peer_env.py``), and a timeout, a crash or a kill
(out of memory) comes back as a record with ``status`` and ``reason`` instead of an exception.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def spawn_json(script: str, cfg: dict, threads: int, timeout: float, python: str = None, env_extra=None,
               args=("--child",)) -> dict:
    """``python script --child CFG_JSON`` with ``threads`` threads; the child's last JSON line,
    plus ``child_wall_s``. Failures: ``status`` = timeout / killed / failed, ``reason``,
    ``stderr_tail``."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env.update(env_extra or {})
    cmd = [python or sys.executable, script, *args, json.dumps(cfg)]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return dict(status="timeout", reason=f"exceeded the per-config timeout of {timeout:.0f} s",
                    child_wall_s=time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    lines = [ln for ln in r.stdout.strip().splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        err = (r.stderr or r.stdout or "").strip().splitlines()
        if r.returncode in (-9, 137):
            status, reason = "killed", "killed (signal 9; out of memory?)"
        elif r.returncode < 0:
            status, reason = "killed", f"killed (signal {-r.returncode})"
        else:
            status, reason = "failed", (err[-1] if err else f"exit code {r.returncode}")
        return dict(status=status, reason=reason[:400], returncode=r.returncode,
                    stderr_tail="\n".join(err[-15:])[-3000:], child_wall_s=wall)
    res = json.loads(lines[-1])
    res.setdefault("child_wall_s", wall)
    return res
