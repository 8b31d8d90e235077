"""seastar's caching CPU allocator (runtime/cpu/cpu_allocator.h), which `import seastar` makes
torch's: large tensors reuse freed blocks, torch's results are unchanged, the choice can be
undone from the environment, and a forked child can allocate."""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import threading

import pytest
import torch

import seastar as ss

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)


def test_installed_at_import_and_reused_by_an_epoch_loop():
    if os.environ.get("SEASTAR_CPU_ALLOCATOR") == "torch":
        pytest.skip("SEASTAR_CPU_ALLOCATOR=torch in this environment")
    assert ss.cpu_allocator_stats()["installed"]
    w = torch.randn(256, 256, dtype=torch.float64)
    x = torch.randn(20000, 256, dtype=torch.float64)  # 40 MB: every product below is a large block
    before = ss.cpu_allocator_stats()
    outs = []
    for _ in range(3):  # the same sizes each "epoch": from the second on, served by reuse
        h = torch.relu(x @ w)
        outs.append((h @ w.t()).sum(0))
        del h
    after = ss.cpu_allocator_stats()
    assert after["reused"] >= before["reused"] + 4
    ref = torch.relu(x @ w) @ w.t()
    for o in outs:
        torch.testing.assert_close(o, ref.sum(0), rtol=0, atol=0)
    assert after["live_bytes"] + after["idle_bytes"] <= after["peak_live_bytes"]


def test_fresh_process_counts_and_footprint():
    r = _python("import seastar as ss, torch, json\n"
                "blocks = [torch.ones(3 << 20, dtype=torch.uint8) for _ in range(4)]\n"
                "del blocks\n"
                "s1 = ss.cpu_allocator_stats()\n"
                "again = [torch.ones(3 << 20, dtype=torch.uint8) for _ in range(4)]\n"
                "s2 = ss.cpu_allocator_stats()\n"
                "assert all(int(t.sum()) == 3 << 20 for t in again)\n"
                "del again\n"
                "ss.release_idle_cpu_memory()\n"
                "print(json.dumps([s1, s2, ss.cpu_allocator_stats()]))\n")
    assert r.returncode == 0, r.stderr
    import json
    s1, s2, s3 = json.loads(r.stdout.strip().splitlines()[-1])
    # (adjacent blocks merge when idle, so they may be fewer than four)
    assert s1["installed"] and s1["idle_bytes"] >= 4 * (3 << 20) and s1["live_bytes"] + s1["idle_bytes"] <= s1["peak_live_bytes"]
    assert s2["reused"] >= s1["reused"] + 4 and s2["mapped"] == s1["mapped"]  # no new mapping
    assert s3["idle_bytes"] == 0


def test_torchs_allocator_on_request_and_a_clear_error_for_an_unknown_one():
    r = _python("import seastar as ss; print(ss.cpu_allocator_stats()['installed'])", SEASTAR_CPU_ALLOCATOR="torch")
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    r = _python("import seastar", SEASTAR_CPU_ALLOCATOR="tcmalloc")
    assert r.returncode != 0
    assert "SEASTAR_CPU_ALLOCATOR='tcmalloc'" in r.stderr and "'caching'" in r.stderr and "Traceback" in r.stderr


def _child_sum(q):
    torch.set_num_threads(1)  # libgomp's threads do not survive fork(); the allocator must
    q.put(float(torch.ones(4 << 20, dtype=torch.float32).sum()))


def test_forked_children_allocate_while_a_parent_thread_does():
    """fork() while another thread of the parent is inside the allocator must leave the child
    a usable one (the allocator's lock is taken around fork)."""
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            torch.empty(3 << 20, dtype=torch.uint8).fill_(1)

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        ctx = mp.get_context("fork")
        for _ in range(4):
            q = ctx.Queue()
            p = ctx.Process(target=_child_sum, args=(q,))
            p.start()
            value = q.get(timeout=120)
            p.join(timeout=60)
            assert p.exitcode == 0 and value == float(4 << 20)
    finally:
        stop.set()
        worker.join()
