"""The thread governor (python/seastar/_thread_governor.py) against real CPU-bound processes.

One spinning process per usable CPU: within a few launches torch's thread count is lowered (the
kernels' results unchanged), switching the governor off gives the user's count back at once, the
standing measurement lowers it again at the next launch, a torch.compile'd function is compiled
for each count it runs at (and gives the same results), torch's deterministic mode gives the
count back and stops the sampling, and once the processes are gone the user's count returns
(unless other load on the machine, measured here independently, explains why not). The
decisions themselves are tested with synthetic readings in tests/cpp/test_thread_governor.cpp.
The rest of the suite runs with the governor off (conftest.py), so no other test depends on the
machine's load.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

import seastar as ss

SPIN = "while True:\n    pass\n"
DEADLINE_S = 15.0  # the governor needs two samples 0.2 s apart; generous for a loaded machine


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


# serial: the governor reads the machine's load, which another worker would change
pytestmark = [pytest.mark.skipif(not ss.thread_governor_stats()["available"] or not 2 <= _cpus() <= 16,
                                reason="needs /proc/stat and 2 to 16 usable CPUs"),
              pytest.mark.serial]


@ss.vertex_program
def weighted_sum(v):
    return sum(e.src.h * e.w for e in v.in_edges())


@pytest.fixture
def governed():
    threads = torch.get_num_threads()
    ss.set_thread_governor(True)
    yield
    torch.use_deterministic_algorithms(False)
    ss.set_thread_governor(False)
    torch.set_num_threads(threads)


def _launch_until(cond, run) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond() and time.monotonic() < deadline:
        run()


def test_lowered_while_other_processes_take_the_cores(governed, graph_factory):
    g = graph_factory("mixed")
    src, dst = g.edge_index
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(g.num_nodes, 8, dtype=torch.float64, generator=gen)
    w = torch.randn(g.num_edges, 1, dtype=torch.float64, generator=gen)
    want = torch.zeros_like(h).index_add_(0, dst, h[src] * w)
    run = lambda: weighted_sum(g, h=h, w=w)

    cpus = _cpus()
    torch.set_num_threads(cpus)
    run()
    before = ss.thread_governor_stats()
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(cpus)]
    try:
        _launch_until(lambda: torch.get_num_threads() < cpus, run)
        st = ss.thread_governor_stats()
        assert torch.get_num_threads() < cpus, st
        assert st["requested"] == cpus and st["threads"] == torch.get_num_threads(), st
        assert st["other_cores"] >= 0.5 and st["lowered"] > before["lowered"], st
        torch.testing.assert_close(run(), want, rtol=1e-12, atol=1e-12)

        ss.set_thread_governor(False)
        assert torch.get_num_threads() == cpus  # the user's count, at once
        ss.set_thread_governor(True)
        run()
        assert torch.get_num_threads() < cpus  # the load measured still stands: lowered at the next launch

        # torch.compile guards on torch's thread count (its C++ kernels keep the count they were
        # generated with): a compiled function is compiled again for the count the governor
        # gives, and its results do not change
        seen = []

        def backend(gm, example_inputs):
            seen.append(torch.get_num_threads())
            return gm.forward

        torch._dynamo.reset()
        compiled = torch.compile(run, backend=backend)
        torch.testing.assert_close(compiled(), want, rtol=1e-12, atol=1e-12)
        ss.set_thread_governor(False)
        torch.testing.assert_close(compiled(), want, rtol=1e-12, atol=1e-12)
        ss.set_thread_governor(True)
        torch.testing.assert_close(compiled(), want, rtol=1e-12, atol=1e-12)
        assert sorted(set(seen)) == sorted({torch.get_num_threads(), cpus}), seen

        torch.use_deterministic_algorithms(True)
        run()
        assert torch.get_num_threads() == cpus  # results must not depend on the load: the user's count
        samples = ss.thread_governor_stats()["samples"]
        time.sleep(0.3)
        run()
        assert torch.get_num_threads() == cpus and ss.thread_governor_stats()["samples"] == samples
        torch.use_deterministic_algorithms(False)
        _launch_until(lambda: torch.get_num_threads() < cpus, run)
        assert torch.get_num_threads() < cpus, ss.thread_governor_stats()
    finally:
        for p in spinners:
            p.kill()
            p.wait()

    _launch_until(lambda: torch.get_num_threads() == cpus, run)
    st = ss.thread_governor_stats()
    if torch.get_num_threads() != cpus:  # only acceptable if something else keeps this machine busy
        assert _other_load_now() >= 0.4, f"the count stays lowered on an idle machine: {st}"
    else:
        assert st["restored"] > before["restored"], st
    torch.testing.assert_close(run(), want, rtol=1e-12, atol=1e-12)


def _other_load_now(seconds: float = 1.0) -> float:
    """Cores kept busy by other processes over the next `seconds`, measured independently of the
    governor: busy jiffies of this process's CPUs in /proc/stat, less this process's CPU time."""
    cpus = os.sched_getaffinity(0)

    def busy() -> float:
        total = 0
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                    v = [int(x) for x in fields[:8]]
                    total += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
        return total / os.sysconf("SC_CLK_TCK")

    b0, c0, t0 = busy(), time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (busy() - b0 - (time.process_time() - c0)) / (time.monotonic() - t0)


def test_environment_switch():
    """Off unless asked for (it changes torch's thread count); SEASTAR_THREAD_GOVERNOR=1 asks."""
    env = {k: v for k, v in os.environ.items() if k != "SEASTAR_THREAD_GOVERNOR"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    code = "import seastar as ss; print(ss.thread_governor_stats()['enabled'])"
    for value, enabled in ((None, "False"), ("0", "False"), ("1", "True"), ("on", "True")):
        if value is not None:
            env["SEASTAR_THREAD_GOVERNOR"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == enabled, (value, out.stderr)
    env["SEASTAR_THREAD_GOVERNOR"] = "sometimes"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "ValueError" in out.stderr and "SEASTAR_THREAD_GOVERNOR='sometimes'" in out.stderr
