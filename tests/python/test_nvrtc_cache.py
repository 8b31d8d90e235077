"""The NVRTC cubin cache under faults (kernels/nvrtc_compiler.cpp): compiled without a GPU.

A damaged cubin used to be handed to the driver as it was; now each entry verifies itself
(kernels/kernel_cache.h) and a bad one is rebuilt once with a warning.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cache_entries
import seastar as ss

if not getattr(ss._C, "cuda_built", False):
    pytest.skip("this build has no CUDA backend", allow_module_level=True)
_ok, _why = ss._C.nvrtc_available()
if not _ok:
    pytest.skip(f"NVRTC cannot be loaded: {_why}", allow_module_level=True)

NAMES = ["truncated", "garbage", "directory", "swap_a", "swap_b", "intact"]
SCRIPT = """
import json, seastar as ss
out = {}
for i, name in enumerate(%r):
    src = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = %%d.0f * p[threadIdx.x]; }' %% (i + 1)
    r = ss._C.nvrtc_compile(src, 80, name)
    out[name] = dict(hit=r["cache_hit"], size=r["size"], path=r["path"], kernels=r["kernels"])
print(json.dumps(out))
""" % NAMES


def _run(cache: Path):
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), SEASTAR_LOG_LEVEL="info", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_damaged_cubins_are_rebuilt_once(tmp_path):
    cache = tmp_path / "kernels"
    cold, _ = _run(cache)
    assert not any(v["hit"] for v in cold.values())
    cache_entries.check_dir(cache)
    path = {n: Path(v["path"]) for n, v in cold.items()}
    data = path["truncated"].read_bytes()
    path["truncated"].write_bytes(data[: len(data) // 2])
    data = path["garbage"].read_bytes()
    path["garbage"].write_bytes(data[:256] + os.urandom(len(data) - 256))
    path["directory"].unlink()
    path["directory"].mkdir()
    a, b = path["swap_a"].read_bytes(), path["swap_b"].read_bytes()
    path["swap_a"].write_bytes(b)
    path["swap_b"].write_bytes(a)

    warm, err = _run(cache)
    damaged = [n for n in NAMES if n != "intact"]
    assert [n for n in NAMES if not warm[n]["hit"]] == damaged
    assert err.count("is unusable") == len(damaged), err
    for n in NAMES:
        assert warm[n]["size"] == cold[n]["size"] and warm[n]["kernels"] == cold[n]["kernels"], n
    cache_entries.check_dir(cache)

    again, err = _run(cache)
    assert all(v["hit"] for v in again.values()) and "is unusable" not in err, err
    # the ptxas report rides in the entry: a cached cubin still knows its registers
    assert again["intact"]["kernels"] == cold["intact"]["kernels"] and cold["intact"]["kernels"][0]["registers"] > 0


INTERRUPTED = """
import json, signal, sys, time, seastar as ss
# Ctrl-C as an interactive Python gets it, even when this test runs in a background job (which
# starts with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
src = "\\n".join('extern "C" __global__ void k%d(float* p) { float x = p[threadIdx.x];\\n#pragma unroll\\n'
                'for (int i = 0; i < 20; ++i) x = sinf(x * %d.0f + i) * cosf(x + i);\\n p[threadIdx.x] = x; }'
                % (i, i + 1) for i in range(4))
if sys.argv[1] == "again":
    print(json.dumps(dict(hit=ss._C.nvrtc_compile(src, 80, "interrupted")["cache_hit"])))
    sys.exit(0)
print("START", flush=True)
t = time.monotonic()
try:
    ss._C.nvrtc_compile(src, 80, "interrupted")
    print("COMPLETED", flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED %.3f" % (time.monotonic() - t), flush=True)
"""


def test_ctrl_c_during_nvrtc_arrives_when_it_returns_and_leaves_a_good_entry(tmp_path):
    """NVRTC compiles in this process and cannot be cancelled: Ctrl-C (SIGINT to the process
    group, as a terminal sends it) is raised as KeyboardInterrupt as soon as the compile call
    returns, and the cubin it produced is a complete entry, which the next run finds."""
    cache = tmp_path / "kernels"
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", INTERRUPTED, "first"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout.readline().strip() == "START", p.communicate()
    time.sleep(0.3)  # well inside the compile, which takes seconds
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert out.startswith("INTERRUPTED"), (out, err)
    cache_entries.check_dir(cache)
    again = subprocess.run([sys.executable, "-c", INTERRUPTED, "again"], env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1]) == {"hit": True}
