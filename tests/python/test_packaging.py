"""Seastar as users install it: the wheel in a fresh venv, and the installed C++ library.

* ``pip wheel --no-build-isolation`` of the checkout (scikit-build-core, against this
  interpreter's torch), installed into a new venv that sees only the wheel, torch, numpy and
  what those two require; from a temporary folder outside the checkout, with an empty kernel
  cache, a GCN trains a few epochs on the shipped Cora, ``python -m seastar --check`` passes,
  and a torch of another version is refused at import with both versions named.
* ``cmake --install`` of the development build into a prefix, then tests/cpp_consumer (an
  out-of-tree project: find_package(seastar), seastar::runtime) configured with LibTorch from
  CMAKE_PREFIX_PATH, built and run; LibTorch that is missing or of another version is a clear
  configure error.

Work is reused between runs: the wheel's CMake tree is build-wheel/ (pyproject.toml), the
consumer's is <build>/packaging/, and both compile through ccache (CCACHE_BASEDIR, exported by
scripts/setup.sh, makes build/ and build-wheel/ share objects). SEASTAR_SKIP_PACKAGING=1 skips
this file.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SEASTAR_BUILD_DIR", ROOT / "build"))

# the wheel and the consumer project build into fixed folders (build-wheel/, build/packaging/):
# the test command's workers take whole files, so one worker owns both
pytestmark = pytest.mark.skipif(os.environ.get("SEASTAR_SKIP_PACKAGING") == "1", reason="SEASTAR_SKIP_PACKAGING=1")


def _project_version() -> str:
    m = re.search(r"project\(seastar VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    assert m, "CMakeLists.txt has no project(seastar VERSION x.y.z)"
    return m.group(1)


def _build_env() -> dict:
    """The environment of the builds: ccache, the job count of scripts/setup.sh, no checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("CCACHE_BASEDIR", str(ROOT))
    if shutil.which("ccache"):
        env.setdefault("CMAKE_CXX_COMPILER_LAUNCHER", "ccache")
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", os.environ.get("SEASTAR_BUILD_JOBS", str(os.cpu_count() or 1)))
    # scikit-build-core would take Python's compiler (g++) where CMake took c++: the same
    # compiler under another name is another ccache key
    compiler = _cache_entry("CMAKE_CXX_COMPILER")
    if compiler:
        env.setdefault("CXX", compiler)
    return env


def _cache_entry(name: str):
    """A value of the development build's CMakeCache.txt, or None."""
    cache = BUILD / "CMakeCache.txt"
    if cache.is_file():
        m = re.search(rf"^{name}:[A-Z]+=(.*)$", cache.read_text(), re.M)
        if m:
            return m.group(1)
    return None


def _run(cmd, timeout, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


# ---- the wheel ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    if importlib.util.find_spec("scikit_build_core") is None:
        pytest.skip("scikit-build-core is not installed here (scripts/setup.sh installs requirements-build.txt)")
    out = tmp_path_factory.mktemp("wheel")
    env = _build_env()
    stale = ROOT / "build-wheel" / "CMakeCache.txt"  # CMake keeps the compiler of a tree's first configure
    if "CXX" in env and stale.is_file() and f"CMAKE_CXX_COMPILER:FILEPATH={env['CXX']}\n" not in stale.read_text():
        shutil.rmtree(ROOT / "build-wheel")
    # the development build's extra CMake options (scripts/setup.sh), for the same configuration
    extra = shlex.split(os.environ.get("SEASTAR_CMAKE_ARGS", ""))
    config = ["-C", "cmake.args=" + ";".join(extra)] if extra else []
    _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", *config, "-w", out, ROOT],
         timeout=3600, env=env, cwd=out)
    wheels = list(out.glob("seastar-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _requirement_closure(names) -> list:
    """The installed distributions `names` need, themselves included (extras and foreign markers skipped)."""
    from importlib import metadata
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip's copy
        from pip._vendor.packaging.requirements import Requirement
    seen, todo, dists = set(), list(names), []
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this environment does not have
        dists.append(dist)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return dists


def _link_dependencies(dest: Path) -> None:
    """A folder of links to torch, numpy and their requirements in this interpreter's
    site-packages: the new venv reuses the installed torch without seeing anything else here
    (pytest, pybind11, a checkout on a .pth line)."""
    dest.mkdir()
    for dist in _requirement_closure(["torch", "numpy"]):
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (dest / top).exists() and top != "__pycache__":
                (dest / top).symlink_to(src)


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Path:
    """The python of a fresh venv holding the wheel (and, through a .pth line, torch and numpy)."""
    base = tmp_path_factory.mktemp("venv")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], timeout=300)
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        timeout=60).stdout.strip())
    _link_dependencies(base / "deps")
    (purelib / "torch_and_numpy.pth").write_text(f"{base / 'deps'}\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
         timeout=600)
    return python


def _run_installed(python: Path, args, cwd: Path, timeout=900, expect_ok=True) -> subprocess.CompletedProcess:
    """`python -I` (no PYTHONPATH, no script folder on sys.path) in `cwd`, with an empty kernel cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["SEASTAR_CACHE_DIR"] = str(cwd / "kernel-cache")
    env["SEASTAR_TEST_CHECKOUT"] = str(ROOT)
    cmd = [str(python), "-I", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    if expect_ok:
        assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def test_wheel_holds_the_package_extension_and_data(wheel):
    assert wheel.name.startswith(f"seastar-{_project_version()}-"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("seastar/__init__.py", "seastar/__main__.py", "seastar/_version.py", "seastar/nn/gcn_conv.py",
                     "seastar/datasets/data/planetoid/cora/edges.txt",
                     "seastar/datasets/data/planetoid/citeseer/features.txt"):
        assert required in names, f"{required} missing from {wheel.name}"
    assert [n for n in names if re.fullmatch(r"seastar/_C\..*\.so", n)], "no extension in the wheel"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    version_py = zipfile.ZipFile(wheel).read("seastar/_version.py").decode()
    import torch
    assert f'torch_version = "{torch.__version__}"' in version_py, version_py


def test_installed_package_trains_outside_the_checkout(installed, tmp_path):
    script = tmp_path / "train_gcn.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys
        import torch
        import torch.nn.functional as F
        import seastar
        import seastar.nn as snn

        checkout = os.path.realpath(os.environ["SEASTAR_TEST_CHECKOUT"])
        on_path = [p for p in sys.path if p and os.path.realpath(p).startswith(checkout + os.sep)]
        assert not on_path, f"the checkout is on sys.path: {on_path}"
        assert os.path.realpath(seastar.__file__).startswith(os.path.realpath(sys.prefix)), seastar.__file__

        torch.manual_seed(0)
        ds = seastar.datasets.load("cora")
        model = torch.nn.ModuleList([snn.GCNConv(ds.num_features, 16), snn.GCNConv(16, ds.num_classes)])
        snn.set_backend(model, "fused")  # the generated kernels, never the reference fallback
        opt = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
        losses = []
        for epoch in range(20):
            opt.zero_grad()
            out = model[1](ds.graph, F.relu(model[0](ds.graph, ds.x)))
            loss = F.cross_entropy(out[ds.train_mask], ds.y[ds.train_mask])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        acc = (out.argmax(-1)[ds.test_mask] == ds.y[ds.test_mask]).float().mean().item()
        print(json.dumps(dict(losses=losses, test_acc=acc, seastar=seastar.__file__)))
    """))
    r = _run_installed(installed, [script], cwd=tmp_path)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["losses"][-1] < result["losses"][0] - 0.3, result["losses"]
    assert result["test_acc"] > 0.5, result
    kernels = list((tmp_path / "kernel-cache").glob("*.so"))
    assert kernels, "no kernel was compiled into the empty cache"


def test_python_m_seastar_diagnoses_and_checks(installed, tmp_path):
    r = _run_installed(installed, ["-m", "seastar", "--check"], cwd=tmp_path)
    import torch
    assert re.search(rf"^seastar +{re.escape(_project_version())} at ", r.stdout, re.M), r.stdout
    assert f"(built against {torch.__version__})" in r.stdout, r.stdout
    assert re.search(r"^check +ok", r.stdout, re.M), r.stdout
    assert str(tmp_path / "kernel-cache") in r.stdout


def test_another_torch_is_refused_at_import(installed, tmp_path):
    code = "import torch; torch.__version__ = '0.0.1'; import seastar"
    r = _run_installed(installed, ["-c", code], cwd=tmp_path, expect_ok=False)
    import torch
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: seastar "), r.stderr
    assert f"built against torch {torch.__version__}, but torch 0.0.1 is installed" in last, last


# ---- the installed C++ library -----------------------------------------------------------

@pytest.fixture(scope="session")
def prefix() -> Path:
    if not (BUILD / "CMakeCache.txt").is_file():
        pytest.skip(f"no development build at {BUILD} (scripts/setup.sh makes it)")
    dest = BUILD / "packaging" / "prefix"
    shutil.rmtree(dest, ignore_errors=True)
    _run(["cmake", "--install", BUILD, "--prefix", dest], timeout=300)
    assert not (dest / "seastar").exists(), "a plain cmake --install installed the Python package"
    return dest


def _configure_consumer(build_dir: Path, prefix_path: str, *extra) -> subprocess.CompletedProcess:
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    cmd = ["cmake", "-S", ROOT / "tests" / "cpp_consumer", "-B", build_dir, *gen, "-DCMAKE_BUILD_TYPE=Release",
           f"-DCMAKE_PREFIX_PATH={prefix_path}", *extra]
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, env=_build_env())


def test_installed_config_runs_no_python(prefix):
    text = "".join(p.read_text() for p in (prefix / "lib" / "cmake" / "seastar").glob("*.cmake"))
    assert "execute_process" not in text and "find_package(Python" not in text


def test_out_of_tree_cpp_project_builds_and_runs(prefix, tmp_path):
    import torch
    build_dir = BUILD / "packaging" / "consumer"
    r = _configure_consumer(build_dir, f"{prefix};{torch.utils.cmake_prefix_path}")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "(from CMAKE_PREFIX_PATH)" in r.stdout, r.stdout
    _run(["cmake", "--build", build_dir], timeout=1800, env=_build_env())
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(tmp_path / "kernel-cache"))
    r = _run([build_dir / "consumer"], timeout=600, env=env, cwd=tmp_path)
    assert f"seastar {_project_version()} (LibTorch {torch.__version__})" in r.stdout, r.stdout
    assert "consumer ok" in r.stdout, r.stdout


def test_missing_or_mismatched_libtorch_is_a_configure_error(prefix, tmp_path):
    r = _configure_consumer(tmp_path / "no-torch", str(prefix), f"-DTorch_DIR={tmp_path / 'nowhere'}")
    assert r.returncode != 0
    assert "holds no TorchConfig.cmake" in r.stderr, r.stderr

    # a LibTorch of another version: the layout of torch's cmake prefix, version 1.0.0
    fake = tmp_path / "torch"
    for f in ("lib/libtorch.so", "lib/libtorch_cpu.so", "lib/libc10.so", "lib/libtorch_cuda.so",
              "include/torch/csrc/api/include/torch/torch.h", "share/cmake/Torch/TorchConfig.cmake"):
        (fake / f).parent.mkdir(parents=True, exist_ok=True)
        (fake / f).write_text("")
    (fake / "share/cmake/Torch/TorchConfigVersion.cmake").write_text('set(PACKAGE_VERSION "1.0.0")\n')
    r = _configure_consumer(tmp_path / "old-torch", f"{prefix};{fake / 'share' / 'cmake'}")
    assert r.returncode != 0
    message = " ".join(r.stderr.split())
    import torch
    assert f"built against LibTorch {torch.__version__}" in message and "is 1.0.0" in message, message
