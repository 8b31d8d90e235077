"""``python -m seastar``: what this installation is made of and whether it can run kernels.

    python -m seastar            # the diagnosis: versions, compiler, libstdc++, CUDA, kernel cache, threads
    python -m seastar --check    # also compiles and runs a small fused program against plain torch

Exits with 1 when something seastar needs is missing (no host compiler for the CPU kernels) or
the check fails, so scripts can use it as a health check. A torch that does not match the one
seastar was built against stops ``import seastar`` itself, with both versions in the message, and
so does an extension that carries its own copy of libstdc++ (the message names its compiler and the fix).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

import torch

import seastar
from seastar import _C, _cpu_allocator, _openmp_wait, _thread_governor, _version


def _compiler() -> tuple:
    """(description, ok) of the host compiler that builds the CPU kernels."""
    cxx = os.environ.get("SEASTAR_CXX") or "g++"
    origin = "SEASTAR_CXX" if os.environ.get("SEASTAR_CXX") else "default; SEASTAR_CXX unset"
    exe = shutil.which(shlex.split(cxx)[0]) if cxx.strip() else None
    if exe is None:
        return (f"{cxx!r} ({origin}): not found, new CPU kernels cannot be compiled, only ones already in "
                f"the kernel cache load (install g++ or set SEASTAR_CXX)"), False
    try:
        out = subprocess.run(shlex.split(cxx) + ["--version"], capture_output=True, text=True, timeout=30)
        first = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "no output"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cxx!r} ({origin}) at {exe}: does not run: {e}", False
    flags = f"; SEASTAR_CXXFLAGS={os.environ['SEASTAR_CXXFLAGS']}" if os.environ.get("SEASTAR_CXXFLAGS") else ""
    return f"{cxx} ({origin}) at {exe}: {first}{flags}", True


def _cuda() -> list:
    lines = []
    if not _C.cuda_built:
        lines.append(("CUDA backend", "not built (CPU-only build: no CUDA toolkit headers or a CPU torch at build time)"))
    else:
        ok, why = _C.nvrtc_available()
        nvrtc = f"loadable, version {_C.nvrtc_version()}" if ok else f"not loadable: {why}"
        lines.append(("CUDA backend", "built"))
        lines.append(("NVRTC", nvrtc))
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        lines.append(("CUDA devices", f"{torch.cuda.device_count()}: {names}"))
    else:
        lines.append(("CUDA devices", "none visible to torch"))
    return lines


def _libstdcxx() -> str:
    """The libstdc++ the extension calls. One that carries a copy of its own never gets here: `import
    seastar` refuses it with an ImportError that names the fix (its first call would crash)."""
    where = _C.libstdcxx_use(_C.__file__)[1]
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        shared = _C.libstdcxx_use(torch_lib)[1] == where
    except ValueError:  # a torch laid out otherwise: nothing to compare with
        shared = False
    return f"{where or 'none'}{' (the one torch uses)' if shared else ''}"


def _cache() -> str:
    path = _C.kernel_cache_dir()
    if not os.path.isdir(path):
        return f"{path} (created on first compile)"
    n = sum(1 for f in os.listdir(path) if f.endswith(".so"))
    writable = "writable" if os.access(path, os.W_OK) else "NOT writable: kernels cannot be cached"
    return f"{path} ({n} compiled kernels, {writable}; SEASTAR_CACHE_DIR moves it)"


def _check() -> tuple:
    """Runs a sum over in-edges on the fused backend (compiling it if not cached) against torch."""
    g = seastar.Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    h = torch.randn(3, 5, requires_grad=True)

    @seastar.vertex_program(backend="fused")
    def neighbour_sum(v):
        return sum(e.src.h for e in v.in_edges())

    t0 = time.perf_counter()
    try:
        out = neighbour_sum(g, h=h)
        out.sum().backward()
    except Exception as e:  # the diagnosis reports any failure as one line
        return f"FAILED: {type(e).__name__}: {e}", False
    ms = 1e3 * (time.perf_counter() - t0)
    expected = torch.zeros(3, 5).index_add_(0, torch.tensor([1, 2, 0, 1]), h.detach()[[0, 1, 2, 2]])
    if not torch.allclose(out.detach(), expected) or not torch.allclose(h.grad, torch.tensor([1., 1., 2.])[:, None].expand(3, 5)):
        return "FAILED: the fused result differs from plain torch", False
    return f"ok: a fused program compiled (or loaded from the cache) and ran, forward and backward, in {ms:.0f} ms", True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m seastar", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="also compile and run a small fused program")
    args = ap.parse_args(argv)

    compiler, compiler_ok = _compiler()
    rows = [
        ("seastar", f"{seastar.__version__} at {os.path.dirname(seastar.__file__)} ({_version.build_type} build)"),
        ("torch", f"{torch.__version__} (built against {_version.torch_version}) at {os.path.dirname(torch.__file__)}"),
        ("python", f"{sys.version.split()[0]} at {sys.executable}"),
        ("host compiler", compiler),
        ("libstdc++", _libstdcxx()),
        *_cuda(),
        ("kernel cache", _cache()),
        ("threads", f"{torch.get_num_threads()} (torch.get_num_threads(), shared with the kernels' worker pool; "
                    f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})"),
        ("OpenMP wait", f"{_openmp_wait.describe()} (torch's threads after each op)"),
        ("thread governor", _thread_governor.describe()),
        ("CPU allocator", _cpu_allocator.describe()),
        ("log level", f"{_C.get_log_level()} (SEASTAR_LOG_LEVEL)"),
    ]
    ok = compiler_ok
    if args.check:
        line, check_ok = _check() if compiler_ok else ("skipped: no host compiler", False)
        rows.append(("check", line))
        ok = ok and check_ok
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
