"""The separate Python environment the DGL peer runs in.

DGL 2.1 (PyPI's newest) ships its graphbolt library only for torch 2.0.0-2.2.1, so it cannot be
imported next to the torch seastar is built against. The benchmarks create a venv from
``benchmarks/requirements-dgl.txt`` on first use, keyed by the file's hash, under
``~/.cache/seastar/venv-dgl-<hash>`` (``SEASTAR_DGL_PYTHON`` names an interpreter to use
instead), and run DGL's configurations with its interpreter in their own processes.
Requirement lines marked ``# --no-deps`` are installed without their dependencies (torchdata
0.7.1's metadata pins torch 2.1.2, but graphbolt only needs its datapipes).
"""
from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REQ_DGL = os.path.join(HERE, "requirements-dgl.txt")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "seastar")
STAMP = ".seastar-complete"

log = logging.getLogger("seastar.bench.env")


def venv_dir(req: str = REQ_DGL) -> str:
    with open(req, "rb") as fh:
        digest = hashlib.sha1(fh.read()).hexdigest()[:12]
    return os.path.join(CACHE, f"venv-dgl-{digest}")


def _split_requirements(req: str):
    normal, no_deps = [], []
    with open(req) as fh:
        for line in fh:
            spec = line.split("#", 1)[0].strip()
            if not spec:
                continue
            (no_deps if "--no-deps" in line else normal).append(spec)
    return normal, no_deps


def _tail(r) -> str:
    lines = [ln for ln in (r.stderr or r.stdout or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else f"exit {r.returncode}"


def _versions(py: str) -> dict:
    code = ("import json, torch, numpy, dgl; print(json.dumps(dict(dgl=dgl.__version__, "
            "torch=torch.__version__, numpy=numpy.__version__)))")
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"dgl does not import in {py}: {_tail(r)}")
    import json
    return json.loads(r.stdout.strip().splitlines()[-1])


def dgl_python(install: bool = True, timeout: float = 1800) -> dict:
    """``{"python": path, "versions": {...}}`` of an interpreter that imports dgl, or
    ``{"python": None, "reason": why not}``. Creates the venv when ``install`` and it is missing."""
    override = os.environ.get("SEASTAR_DGL_PYTHON")
    if override:
        try:
            return dict(python=override, versions=_versions(override), source="SEASTAR_DGL_PYTHON")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            return dict(python=None, reason=f"SEASTAR_DGL_PYTHON={override}: {exc}")
    venv = venv_dir()
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, STAMP)):
        if not install:
            return dict(python=None, reason=f"no DGL environment at {venv} (installing was disabled)")
        why = _create(venv, timeout)
        if why:
            return dict(python=None, reason=why)
    try:
        return dict(python=py, versions=_versions(py), source=venv)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return dict(python=None, reason=str(exc))


def _create(venv: str, timeout: float):
    """Creates the venv; returns None, or why it could not be created."""
    import shutil
    normal, no_deps = _split_requirements(REQ_DGL)
    log.warning("creating the DGL environment %s from %s (torch 2.2 with its CUDA libraries is a "
                "few GB: minutes the first time)", venv, os.path.relpath(REQ_DGL, os.path.dirname(HERE)))
    shutil.rmtree(venv, ignore_errors=True)
    # The interpreter that runs the suite may itself be a venv's; a venv made from it works.
    steps = [[sys.executable, "-m", "venv", venv],
             [os.path.join(venv, "bin", "pip"), "install", "-q", "--upgrade", "pip"],
             [os.path.join(venv, "bin", "pip"), "install", "-q"] + normal]
    if no_deps:
        steps.append([os.path.join(venv, "bin", "pip"), "install", "-q", "--no-deps"] + no_deps)
    for cmd in steps:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (subprocess.TimeoutExpired, OSError) as exc:
            return f"{' '.join(cmd[:4])} ...: {exc}"
        if r.returncode != 0:
            return f"{' '.join(cmd[:4])} ... failed: {_tail(r)}"
    open(os.path.join(venv, STAMP), "w").close()
    return None


if __name__ == "__main__":  # python benchmarks/_peer_env.py: create (if needed) and print versions
    logging.basicConfig(level=logging.INFO)
    print(dgl_python())


# -- PyG's neighbour sampler -------------------------------------------------------------------
# PyG's NeighborLoader samples with pyg-lib or torch-sparse; neither has a PyPI wheel for this
# torch (pyg-lib is not on PyPI at all; torch-sparse is there as source only), so torch-sparse
# and the torch-scatter it imports are built from source against this interpreter's torch into
# a folder of their own, which the PyG child puts on PYTHONPATH. Built CPU-only.
SPARSE_SOURCES = ("torch-scatter==2.1.2", "torch-sparse==0.6.18")


def sampler_dir() -> str:
    import platform
    import torch
    tv = torch.__version__.split("+")[0]
    return os.path.join(CACHE, f"pyg-sampler-torch{tv}-py{platform.python_version()}")


def pyg_sampler_path(build: bool = True, timeout: float = 2400) -> dict:
    """``{"path": folder to put on PYTHONPATH, "packages": [...]}``, or ``{"path": None,
    "reason": why}``. Builds on first use when ``build`` (tens of minutes on two cores)."""
    import importlib.util
    have = [m for m in ("pyg_lib", "torch_sparse") if importlib.util.find_spec(m)]
    if have:
        return dict(path="", packages=have, source="this interpreter")
    target = sampler_dir()
    failed = os.path.join(target + ".failed")
    if not os.path.exists(os.path.join(target, STAMP)):
        if os.path.exists(failed):
            with open(failed) as fh:
                return dict(path=None, reason=fh.read().strip() + f" (recorded in {failed}; delete it to retry)")
        if not build:
            return dict(path=None, reason=f"torch-sparse is not built for this torch ({target} missing; building "
                                          "was disabled)")
        why = _build_sparse(target, timeout)
        if why:
            os.makedirs(os.path.dirname(failed), exist_ok=True)
            with open(failed, "w") as fh:
                fh.write(why)
            return dict(path=None, reason=why)
    r = subprocess.run([sys.executable, "-c", "import torch_sparse, torch_geometric.typing as t; "
                        "print(torch_sparse.__version__, t.WITH_TORCH_SPARSE)"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=target), timeout=300)
    if r.returncode != 0:
        return dict(path=None, reason=f"torch-sparse built in {target} does not import: {_tail(r)}")
    return dict(path=target, packages=["torch_sparse " + r.stdout.split()[0]], source=target)


def _build_sparse(target: str, timeout: float):
    """Builds the wheels in a throw-away venv that sees this interpreter's packages (so the
    build compiles against its torch without touching it); returns None or why it failed."""
    import shutil
    import site
    import tempfile
    import time
    work = tempfile.mkdtemp(prefix="seastar-sparse-build-")
    venv = os.path.join(work, "venv")
    t0 = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, capture_output=True)
        py = os.path.join(venv, "bin", "python")
        sp = subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                            text=True, check=True).stdout.strip()
        with open(os.path.join(sp, "suite_interpreter.pth"), "w") as fh:
            fh.write("\n".join(site.getsitepackages()) + "\n")
        env = dict(os.environ, FORCE_ONLY_CPU="1", MAX_JOBS=str(os.cpu_count() or 1))
        steps = [[py, "-m", "pip", "install", "-q", "--target", os.path.join(work, "tools"), "setuptools<70", "wheel"],
                 [py, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w", os.path.join(work, "wheels"),
                  *SPARSE_SOURCES],
                 [py, "-m", "pip", "install", "-q", "--no-deps", "--target", target,
                  *[os.path.join(work, "wheels", "*.whl")]]]
        env["PYTHONPATH"] = os.path.join(work, "tools")
        for cmd in steps:
            left = timeout - (time.perf_counter() - t0)
            if "*" in cmd[-1]:
                import glob
                cmd = cmd[:-1] + glob.glob(cmd[-1])
            log.warning("building PyG's sampler: %s", " ".join(cmd[1:6]))
            # its own session, so that a timeout stops the compilers pip started, not only pip
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                    start_new_session=True)
            try:
                stdout, stderr = proc.communicate(timeout=max(left, 1))
            except subprocess.TimeoutExpired:
                import signal
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                return (f"building {', '.join(SPARSE_SOURCES)} from source did not finish in {timeout:.0f} s on "
                        f"{os.cpu_count()} cores")
            r = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
            if r.returncode != 0:
                return f"building {', '.join(SPARSE_SOURCES)} from source failed: {_tail(r)}"
        open(os.path.join(target, STAMP), "w").close()
        return None
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"building {', '.join(SPARSE_SOURCES)} failed: {exc}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
