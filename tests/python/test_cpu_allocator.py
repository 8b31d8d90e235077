"""seastar's caching CPU allocator (runtime/cpu/cpu_allocator.h), which the user may make torch's
(``seastar.install_cpu_allocator()`` or ``SEASTAR_CPU_ALLOCATOR=caching``; torch's stays
otherwise): large tensors reuse freed blocks, torch's results are unchanged, and a forked child
can allocate. Each case runs in a process of its own, since installing it is for the process's
lifetime."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "SEASTAR_CPU_ALLOCATOR"}  # the defaults users get
    full_env.update(PYTHONPATH=os.path.join(ROOT, "python"), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=300)


def _last_json(r: subprocess.CompletedProcess):
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_installed_on_request_and_reused_by_an_epoch_loop():
    before, after, same = _last_json(_python("""
        import json, torch, seastar as ss
        assert ss.install_cpu_allocator() and ss.cpu_allocator_stats()["installed"]
        w = torch.randn(256, 256, dtype=torch.float64)
        x = torch.randn(20000, 256, dtype=torch.float64)  # 40 MB: every product below is a large block
        before = ss.cpu_allocator_stats()
        outs = []
        for _ in range(3):  # the same sizes each "epoch": from the second on, served by reuse
            h = torch.relu(x @ w)
            outs.append((h @ w.t()).sum(0))
            del h
        after = ss.cpu_allocator_stats()
        ref = (torch.relu(x @ w) @ w.t()).sum(0)
        print(json.dumps([before, after, all(torch.equal(o, ref) for o in outs)]))
    """))
    assert after["reused"] >= before["reused"] + 4 and same
    assert after["live_bytes"] + after["idle_bytes"] <= after["peak_live_bytes"]


def test_fresh_process_counts_and_footprint():
    s1, s2, s3 = _last_json(_python("""
        import seastar as ss, torch, json
        blocks = [torch.ones(3 << 20, dtype=torch.uint8) for _ in range(4)]
        del blocks
        s1 = ss.cpu_allocator_stats()
        again = [torch.ones(3 << 20, dtype=torch.uint8) for _ in range(4)]
        s2 = ss.cpu_allocator_stats()
        assert all(int(t.sum()) == 3 << 20 for t in again)
        del again
        ss.release_idle_cpu_memory()
        print(json.dumps([s1, s2, ss.cpu_allocator_stats()]))
    """, SEASTAR_CPU_ALLOCATOR="caching"))
    # (adjacent blocks merge when idle, so they may be fewer than four)
    assert s1["installed"] and s1["idle_bytes"] >= 4 * (3 << 20) and s1["live_bytes"] + s1["idle_bytes"] <= s1["peak_live_bytes"]
    assert s2["reused"] >= s1["reused"] + 4 and s2["mapped"] == s1["mapped"]  # no new mapping
    assert s3["idle_bytes"] == 0


def test_torchs_allocator_unless_asked_and_a_clear_error_for_an_unknown_one():
    code = "import json, seastar as ss, torch; t = torch.ones(8 << 20); print(json.dumps(ss.cpu_allocator_stats()))"
    for env in ({}, {"SEASTAR_CPU_ALLOCATOR": "torch"}):
        stats = _last_json(_python(code, **env))
        assert not stats["installed"] and stats["mapped"] == 0 and stats["live_bytes"] == 0, (env, stats)
    r = _python("import seastar", SEASTAR_CPU_ALLOCATOR="tcmalloc")
    assert r.returncode != 0
    assert "SEASTAR_CPU_ALLOCATOR='tcmalloc'" in r.stderr and "'caching'" in r.stderr and "Traceback" in r.stderr


def test_forked_children_allocate_while_a_parent_thread_does():
    """fork() while another thread of the parent is inside the allocator must leave the child
    a usable one (the allocator's lock is taken around fork)."""
    assert _last_json(_python("""
        import json, multiprocessing as mp, threading, torch, seastar as ss
        assert ss.install_cpu_allocator()

        def child_sum(q):
            torch.set_num_threads(1)  # libgomp's threads do not survive fork(); the allocator must
            q.put(float(torch.ones(4 << 20, dtype=torch.float32).sum()))

        stop = threading.Event()

        def churn():
            while not stop.is_set():
                torch.empty(3 << 20, dtype=torch.uint8).fill_(1)

        worker = threading.Thread(target=churn)
        worker.start()
        results = []
        try:
            ctx = mp.get_context("fork")
            for _ in range(4):
                q = ctx.Queue()
                p = ctx.Process(target=child_sum, args=(q,))
                p.start()
                value = q.get(timeout=120)
                p.join(timeout=60)
                results.append(p.exitcode == 0 and value == float(4 << 20))
        finally:
            stop.set()
            worker.join()
        print(json.dumps(results))
    """)) == [True] * 4
