"""Configuring with CMake 4 and a CUDA 13 toolkit (configure only, nothing is built).

CMake 4's FindCUDAToolkit takes the include folders from nvcc, and nvcc 13 searches two:
``<toolkit>/include`` and ``<toolkit>/include/cccl``, so ``CUDAToolkit_INCLUDE_DIRS`` is a list.
cmake/SeastarCUDA.cmake must find the toolkit's root through the folder holding cuda.h and
nvrtc.h and put every folder on the CUDA sources' include path.

The toolchain is CMake and the toolkit as published on PyPI (tests/toolchain/cmake4-cuda13.txt),
installed once into ~/.cache/seastar/ and laid out as the toolkit's installer lays it out (the
``libcudart.so`` development link, which FindCUDAToolkit looks for). nvcc is the real one: CMake
runs it to learn the include folders. The whole project is configured, with this interpreter's
torch; a torch without CUDA builds no CUDA backend and the test is skipped. Without the packages
(no network and an empty cache) the test is skipped too, with the pip error as the reason.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "tests" / "toolchain" / "cmake4-cuda13.txt"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seastar"


def _install_toolchain() -> Path:
    """The folder holding CMake 4 and the CUDA 13 packages, installed on first use."""
    key = hashlib.sha1(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    dest = CACHE / f"cmake4-cuda13-{key}"
    if (dest / ".complete").is_file():
        return dest
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = CACHE / f"{dest.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "--retries", "2", "--timeout", "30", "--target", str(tmp), "-r", str(REQUIREMENTS)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        r = None
        why = str(e)
    if r is None or r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        if r is not None:
            lines = [ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip()]
            why = lines[-1] if lines else f"pip exited with {r.returncode}"
        pytest.skip(f"CMake 4 and the CUDA 13 packages of {REQUIREMENTS.name} could not be installed: {why}")
    cuda = tmp / "nvidia" / "cu13"
    # the development link of the toolkit's installer: FindCUDAToolkit finds the runtime by it
    (cuda / "lib" / "libcudart.so").symlink_to("libcudart.so.13")
    # NVRTC's libraries are most of the download's size; configuring needs only its header
    for lib in (cuda / "lib").glob("libnvrtc*"):
        lib.unlink()
    (tmp / ".complete").touch()
    try:
        tmp.rename(dest)
    except OSError:  # another run finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@pytest.fixture(scope="session")
def toolchain():
    import torch
    lib = Path(torch.__file__).resolve().parent / "lib" / "libtorch_cuda.so"
    if not lib.exists():
        pytest.skip(f"torch {torch.__version__} has no CUDA ({lib.name}): a CUDA build is not configured against it")
    dest = _install_toolchain()
    cmake = dest / "cmake" / "data" / "bin" / "cmake"
    version = subprocess.run([str(cmake), "--version"], capture_output=True, text=True, timeout=60).stdout
    assert version.startswith("cmake version 4."), version
    return cmake, dest / "nvidia" / "cu13"


def test_configures_with_cmake4_and_cuda13(toolchain, tmp_path):
    cmake, cuda = toolchain
    env = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "CUDAToolkit_ROOT")}
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    build = tmp_path / "build"
    cmd = [str(cmake), "-S", str(ROOT), "-B", str(build), *gen, f"-DPython3_EXECUTABLE={sys.executable}",
           f"-DCUDAToolkit_ROOT={cuda}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"

    # FindCUDAToolkit found this toolkit through its nvcc, and handed over both folders
    cache = (build / "CMakeCache.txt").read_text()
    assert f"CUDAToolkit_NVCC_EXECUTABLE:FILEPATH={cuda}/bin/nvcc\n" in cache, cache
    include, cccl = cuda / "include", cuda / "include" / "cccl"
    assert f"Seastar: CUDA backend on (headers in {include}, {cccl};" in r.stdout, r.stdout

    # ... and the CUDA sources compile with every one of them
    commands = json.loads((build / "compile_commands.json").read_text())
    runtime = [c["command"] for c in commands if c["file"].endswith("runtime/cuda/cuda_runtime.cpp")]
    assert runtime, "runtime/cuda/cuda_runtime.cpp is not compiled"
    args = runtime[0].split()
    system = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-isystem"]
    assert str(include) in system and str(cccl) in system, runtime[0]
