"""The host-compiler JIT's disk cache under faults (runtime/jit/compiler.cpp, runtime/jit/kernel_cache.cpp).

Each fault runs a fresh process over a copy of a warm cache: a damaged entry must be rebuilt
with one warning and the results must not change; no run may leave a bad entry or a temporary
file behind. Before entries verified themselves, these runs died: a truncated .so in dlopen
(SIGBUS), garbage after its first 4 KiB (SIGSEGV), the forward and backward objects swapped
(SIGSEGV inside the kernel).

Tests run as root in CI, where permission bits do not stop reads or writes; the unreadable-entry
and read-only-directory cases therefore drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
child's bounding set (root then obeys the bits like anyone), and skip only where that is refused.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cache_entries

PROGRAM = """
import sys, torch, seastar as ss
g = ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)

@ss.vertex_program(name="cache_probe")
def prog(v):
    return sum(e.src.h * v.w for e in v.in_edges())

h = torch.arange(6.0).view(3, 2).requires_grad_(True)
w = torch.tensor([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]])
out = prog(g, backend="fused", h=h, w=w)
out.backward(torch.ones_like(out) * torch.tensor([1.0, 2.0]))
print("RESULT", out.tolist(), h.grad.tolist())
"""
# plain torch: out[d] = sum of h[u] * w[d] over edges u -> d; dh[u] = sum of g * w[d] over u's out-edges
EXPECTED = "RESULT [[4.0, -10.0], [2.0, 18.0], [4.0, 3.0]] [[0.5, 6.0], [2.0, 2.0], [1.5, 2.0]]"


def _env(cache: Path, **extra) -> dict:
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), SEASTAR_LOG_LEVEL="info", PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("SEASTAR_CXX", None)
    env.pop("SEASTAR_CXXFLAGS", None)
    env.update(extra)
    return env


def _drop_dac():
    """preexec_fn: root loses the capabilities that override permission bits (see the docstring)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            os._exit(97)


def _can_drop_dac() -> bool:
    if os.geteuid() != 0:
        return True
    r = subprocess.run([sys.executable, "-c", "pass"], preexec_fn=_drop_dac)
    return r.returncode == 0


needs_permission_bits = pytest.mark.skipif(not _can_drop_dac(), reason="root here cannot drop CAP_DAC_OVERRIDE")


def _run(cache: Path, script: str = PROGRAM, drop_dac: bool = False, cwd=None, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], env=_env(cache, **env), capture_output=True, text=True,
                          timeout=600, cwd=cwd, preexec_fn=_drop_dac if drop_dac and os.geteuid() == 0 else None)


def _kernels(cache: Path) -> dict:
    """{'forward': path, 'backward': path} of the probe program's shared objects."""
    out = {}
    for p in cache.glob("cache_probe_*.so"):
        out["forward" if "_forward_" in p.name else "backward"] = p
    assert set(out) == {"forward", "backward"}, sorted(q.name for q in cache.iterdir())
    return out


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("warm") / "kernels"
    r = _run(cache)
    assert r.returncode == 0, r.stderr
    assert EXPECTED in r.stdout
    assert r.stderr.count("compiling") == 2
    cache_entries.check_dir(cache)
    return cache


def _copy(warm: Path, tmp_path: Path) -> Path:
    cache = tmp_path / "kernels"
    shutil.copytree(warm, cache)
    return cache


def _truncate(p: Path):
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _garbage_after_4k(p: Path):
    data = p.read_bytes()
    p.write_bytes(data[:4096] + os.urandom(len(data) - 4096))


def _directory(p: Path):
    p.unlink()
    p.mkdir()
    (p / "inside").write_text("a directory where an entry should be")


def _unreadable(p: Path):
    p.chmod(0)


def _forged(p: Path, other: Path):
    """The other kernel's valid object under this entry's key: only the exported key tells."""
    obj, _ = cache_entries.split(other.read_bytes())
    p.write_bytes(cache_entries.seal(obj, cache_entries.key_of(p)))


TINY = """
import json, sys, seastar as ss
src = '// %s\\n#include <cstdint>\\nextern "C" void seastar_entry(const int64_t*, void* const*, void* const*) {}\\n'
print(json.dumps({name: ss._C.jit_compile_cpu(src % name, name) for name in sys.argv[1:]}))
"""


def _run_tiny(cache: Path, names, drop_dac: bool = False):
    """Compiles one tiny source per name (a fraction of a second each) in a fresh process."""
    r = subprocess.run([sys.executable, "-c", TINY, *names], env=_env(cache), capture_output=True, text=True,
                       timeout=600, preexec_fn=_drop_dac if drop_dac and os.geteuid() == 0 else None)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_damaged_entries_are_rebuilt_once_with_a_warning(tmp_path):
    damages = {"truncated": _truncate, "garbage_after_4k": _garbage_after_4k, "directory": _directory,
               "forged": None}
    if _can_drop_dac():
        damages["unreadable"] = _unreadable
    names = list(damages) + ["intact"]
    cache = tmp_path / "kernels"
    cold, _ = _run_tiny(cache, names)
    assert not any(r["cache_hit"] for r in cold.values())
    path = {n: Path(r["path"]) for n, r in cold.items()}
    for name, damage in damages.items():
        if name == "forged":
            _forged(path[name], path["intact"])
        else:
            damage(path[name])

    warm, err = _run_tiny(cache, names, drop_dac="unreadable" in damages)
    assert [n for n in names if not warm[n]["cache_hit"]] == list(damages), err
    assert err.count("is unusable") == len(damages), err
    assert err.count("compiling") == len(damages), err
    assert {n: r["path"] for n, r in warm.items()} == {n: str(p) for n, p in path.items()}
    cache_entries.check_dir(cache)
    again, err = _run_tiny(cache, names)
    assert all(r["cache_hit"] for r in again.values()) and "is unusable" not in err, err


def test_swapped_forward_and_backward_objects_are_rebuilt(warm, tmp_path):
    """The real kernels: each would have run on the other's buffers (SIGSEGV)."""
    cache = _copy(warm, tmp_path)
    k = _kernels(cache)
    fwd, bwd = k["forward"].read_bytes(), k["backward"].read_bytes()
    k["forward"].write_bytes(bwd)
    k["backward"].write_bytes(fwd)
    r = _run(cache)
    assert r.returncode == 0, r.stderr
    assert EXPECTED in r.stdout
    assert r.stderr.count("is unusable") == 2 and "another key" in r.stderr, r.stderr
    assert r.stderr.count("compiling") == 2, r.stderr
    cache_entries.check_dir(cache)


def test_a_damaged_index_without_a_compiler_is_one_clear_error(warm, tmp_path):
    cache = _copy(warm, tmp_path)
    (index,) = cache.glob("cache_probe_forward_*.index")
    _truncate(index)
    r = _run(cache, SEASTAR_CXX="/nonexistent/g++")
    assert r.returncode != 0
    assert "CompileError" in r.stderr and "/nonexistent/g++" in r.stderr and "index" in r.stderr, r.stderr
    assert not index.exists(), "the bad index must not stay"
    cache_entries.check_dir(cache)


def test_a_warm_cache_needs_no_compiler(warm, tmp_path):
    cache = _copy(warm, tmp_path)
    r = _run(cache, SEASTAR_CXX="/nonexistent/g++")
    assert r.returncode == 0, r.stderr
    assert EXPECTED in r.stdout
    assert "compiling" not in r.stderr


def test_a_cold_cache_without_a_compiler_names_the_compiler(tmp_path):
    r = _run(tmp_path / "kernels", SEASTAR_CXX="/nonexistent/g++")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("seastar._C.CompileError") or "CompileError" in r.stderr, r.stderr
    assert "/nonexistent/g++" in r.stderr and "SEASTAR_CXX" in r.stderr, r.stderr
    assert r.stderr.count("Traceback") == 1, r.stderr


@needs_permission_bits
def test_a_read_only_cache_dir_reports_the_failed_write(tmp_path):
    cache = tmp_path / "kernels"
    cache.mkdir()
    cache.chmod(0o555)
    r = _run(cache, drop_dac=True)
    assert r.returncode != 0
    assert "CompileError" in r.stderr and "cannot write" in r.stderr and str(cache) in r.stderr, r.stderr
    assert "rename" not in r.stderr, r.stderr
    assert "Permission denied" in r.stderr, r.stderr


@needs_permission_bits
def test_a_warm_read_only_cache_dir_still_serves(warm, tmp_path):
    cache = _copy(warm, tmp_path)
    cache.chmod(0o555)
    r = _run(cache, drop_dac=True)
    assert r.returncode == 0, r.stderr
    assert EXPECTED in r.stdout and "compiling" not in r.stderr


FULL = """
import json, sys, seastar as ss
src = '// full\\n#include <cstdint>\\nextern "C" void seastar_entry(const int64_t*, void* const*, void* const*) {}\\n'
try:
    print(json.dumps(dict(ok=ss._C.jit_compile_cpu(src, "full_cache"))))
except Exception as e:
    print(json.dumps(dict(error=type(e).__name__, message=str(e))))
"""


def _limit_file_size():
    """preexec_fn: files this process and its compiler write stop at 8 KiB, as on a full disk
    (SIGXFSZ ignored, so the write fails with EFBIG instead of killing the writer)."""
    import resource
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


def _run_full(cache: Path, limit: bool) -> dict:
    r = subprocess.run([sys.executable, "-c", FULL], env=_env(cache), capture_output=True, text=True, timeout=600,
                       preexec_fn=_limit_file_size if limit else None)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["tmpfs", "file_size_limit"])
def test_a_full_cache_folder_is_one_clear_error_and_leaves_no_entry(tmp_path, how):
    """A cache folder without room for the shared object (a small tmpfs with room for the source
    alone, or a file-size limit where mounting is not allowed): one CompileError with the
    linker's reason, no temporary file and no partial entry; once there is room, the same
    program compiles and is then found in the cache."""
    cache = tmp_path / "kernels"
    mount = tmp_path / "small"
    mount.mkdir()
    if how == "tmpfs":
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount)],
                                               capture_output=True).returncode != 0:
            pytest.skip("no permission to mount a tmpfs here (the file-size limit case covers it)")
        cache = mount / "kernels"
    try:
        if how == "tmpfs":  # room for the toolchain record and the source (a page each), not the object
            (mount / "filler").write_bytes(b"\0" * (36 * 1024))
        out = _run_full(cache, limit=how == "file_size_limit")
        assert out.get("error") == "CompileError", out
        reason = "No space left on device" if how == "tmpfs" else "File too large"
        assert reason in out["message"] and "full_cache" in out["message"], out["message"]
        cache_entries.check_dir(cache)
        assert not list(cache.glob("*.so")), sorted(p.name for p in cache.iterdir())
        if how == "tmpfs":
            (mount / "filler").unlink()
        first, again = _run_full(cache, limit=False), _run_full(cache, limit=False)
        assert first["ok"]["cache_hit"] is False and again["ok"]["cache_hit"] is True, (first, again)
        cache_entries.check_dir(cache)
    finally:
        if how == "tmpfs":
            subprocess.run(["umount", str(mount)], capture_output=True)


def test_concurrent_processes_compiling_the_same_program(tmp_path):
    cache = tmp_path / "kernels"
    names = [f"concurrent_{i}" for i in range(5)]
    procs = [subprocess.Popen([sys.executable, "-c", TINY, *names], env=_env(cache), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert "is unusable" not in err, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all({n: r["path"] for n, r in res.items()} == {n: r["path"] for n, r in results[0].items()}
               for res in results)
    assert len(list(cache.glob("*.so"))) == len(names)
    cache_entries.check_dir(cache)


SLOW_CXX = """#!/bin/sh
# a compiler that hangs when asked to compile: the test interrupts it
case " $* " in *" -o "*) echo $$ > "$SLOW_CXX_PID"; exec sleep 120;; esac
exec g++ "$@"
"""

INTERRUPTED = """
import os, signal, sys, torch, seastar as ss
# Ctrl-C as an interactive Python gets it, even when this test runs in a background job (which
# starts with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
prog = ss.vertex_program(lambda v: sum(e.src.h for e in v.in_edges()), name="interrupted_probe")
try:
    prog(g, backend="fused", h=torch.ones(2, 3))
except KeyboardInterrupt as e:
    print("INTERRUPTED", e)
print("LEFT", sorted(os.listdir(os.environ["SEASTAR_CACHE_DIR"])))
"""


def test_ctrl_c_while_compiling_raises_keyboard_interrupt_and_caches_nothing(tmp_path):
    cxx = tmp_path / "slow-cxx"
    cxx.write_text(SLOW_CXX)
    cxx.chmod(0o755)
    pid_file = tmp_path / "compiler.pid"
    cache = tmp_path / "kernels"
    # a session of its own: SIGINT to its process group is what a terminal's Ctrl-C sends
    p = subprocess.Popen([sys.executable, "-c", INTERRUPTED], env=_env(cache, SEASTAR_CXX=str(cxx),
                         SLOW_CXX_PID=str(pid_file)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 300
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    compiler = int(pid_file.read_text())
    start = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - start < 30, "the interrupt waited for the compiler"
    assert p.returncode == 0, err
    assert "INTERRUPTED" in out, (out, err)
    left = out.split("LEFT", 1)[1]
    assert ".so" not in left and ".tmp" not in left, left
    with pytest.raises(ProcessLookupError):
        os.kill(compiler, 0)
    cache_entries.check_dir(cache)


def test_a_compiler_killed_by_sigint_is_an_interrupt(tmp_path, monkeypatch):
    import seastar as ss

    cxx = tmp_path / "sigint-cxx"
    cxx.write_text('#!/bin/sh\ncase " $* " in *" -o "*) kill -INT $$; sleep 5;; esac\nexec g++ "$@"\n')
    cxx.chmod(0o755)
    monkeypatch.setenv("SEASTAR_CXX", str(cxx))
    monkeypatch.setenv("SEASTAR_CACHE_DIR", str(tmp_path / "kernels"))
    with pytest.raises(KeyboardInterrupt, match="interrupted"):
        ss._C.jit_compile_cpu("// sigint\n", "sigint")
    assert not list((tmp_path / "kernels").glob("*.so"))
    cache_entries.check_dir(tmp_path / "kernels")


def test_temporaries_of_a_killed_writer_are_swept_by_the_next_process(warm, tmp_path):
    """A process killed while writing an entry (SIGKILL, an OOM kill) leaves its temporary file,
    which nothing renames: the next process using the folder removes it once it is old enough,
    and leaves the entries and a running process's temporaries alone."""
    cache = _copy(warm, tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now belongs to no process
    stale = [cache / f"cache_probe_forward-0123.so.{dead.pid}-0.tmp", cache / f"x.so.{dead.pid}-1.tmp.so"]
    running = cache / f"y.so.{os.getpid()}-0.tmp"
    for p in stale + [running]:
        p.write_bytes(b"half an object")
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    r = _run(cache)
    assert r.returncode == 0, r.stderr
    assert EXPECTED in r.stdout
    assert not any(p.exists() for p in stale)
    assert running.exists()
    running.unlink()
    cache_entries.check_dir(cache)


SAME_KERNEL = """
import json, os, sys, time, torch, seastar as ss
while not os.path.exists(sys.argv[1]):  # both processes start compiling together
    time.sleep(0.005)
g = ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)

@ss.vertex_program(name="build_lock_probe")
def prog(v):
    a = ss.softmax([ss.tanh(e.src.h * v.w).sum(-1, keepdim=True) for e in v.in_edges()])
    return sum(x * ss.exp(e.src.h) for x, e in zip(a, v.in_edges()))

out = prog(g, backend="fused", h=torch.arange(6.0).view(3, 2), w=torch.ones(3, 2))
print(json.dumps({"stats": ss._C.jit_stats(), "out": out.tolist()}))
"""


def test_two_processes_needing_the_same_new_kernel_compile_it_once(tmp_path):
    """runtime/jit/build_lock.h: the second waits for the first's compile and loads its entry;
    the results agree, and no lock file is left in the cache."""
    cache, go = tmp_path / "kernels", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", SAME_KERNEL, str(go)], env=_env(cache), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(0.5)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert results[0]["out"] == results[1]["out"]
    assert sum(r["stats"]["compiled"] for r in results) == 1, [r["stats"] for r in results]
    assert sum(r["stats"]["loaded_from_disk"] for r in results) == 1, [r["stats"] for r in results]
    assert not list(cache.glob("*.lock")), sorted(p.name for p in cache.iterdir())
    cache_entries.check_dir(cache)
