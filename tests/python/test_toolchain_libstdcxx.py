"""The shared libstdc++, never a copy linked in: the configure-time check and the one at import.

torch loads libstdc++.so.6; an extension linked with libstdc++.a carries a second copy and crashes
at its first call. cmake/SeastarLibstdcxx.cmake probes how the compiler links a library and fixes
or refuses it; python/src/libstdcxx_guard.cpp refuses such an extension at import.

* tests/toolchain/libstdcxx (a module library standing in for the extension, configured with the
  same CMake module), configured and built with three compilers:
  - the plain g++: the check passes and adds nothing;
  - a wrapper that passes ``-B<folder>`` where the folder holds libstdc++.a and no libstdc++.so
    (so g++'s own ``-lstdc++`` finds the archive first, as with a compiler installed that way): the
    module still comes out needing libstdc++.so.6, with no copy of its own;
  - ``-static-libstdc++`` in the linker flags, or inside a wrapper where no search path can undo
    it: configuring stops with the compiler and the fix.
* The check at import, on two small libraries loaded with ctypes, one linked with
  ``-static-libstdc++`` and one normally, and on the built extension itself.

Each configure takes a second or two (nothing of Seastar is built).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "toolchain" / "libstdcxx"
INSERT = "_ZNSo9_M_insertImEERSoT_"  # std::ostream::_M_insert<unsigned long>

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(not (GXX and shutil.which("cmake") and shutil.which("readelf") and shutil.which("nm")),
                                reason="needs g++, cmake, readelf and nm")

SOURCE = textwrap.dedent("""\
    #include <sstream>
    #include <string>
    extern "C" int seastar_test_format(unsigned long n) {
      std::ostringstream s;
      s << n;
      return static_cast<int>(s.str().size());
    }
""")


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)


def _linkage(lib: Path) -> tuple:
    """(needs libstdc++.so, defines libstdc++'s _M_insert<unsigned long> itself) of a built library."""
    dynamic = _run(["readelf", "-d", lib]).stdout
    symbols = _run(["nm", "--defined-only", lib]).stdout.split()
    return "[libstdc++.so" in dynamic, INSERT in symbols


def _static_archive() -> Path:
    archive = Path(_run([GXX, "-print-file-name=libstdc++.a"]).stdout.strip())
    if not archive.is_absolute() or not archive.is_file():
        pytest.skip("g++ has no libstdc++.a here (the static library is part of libstdc++'s development package)")
    return archive


def _configure(build: Path, *args) -> subprocess.CompletedProcess:
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    return _run(["cmake", "-S", PROJECT, "-B", build, *gen, "-DCMAKE_BUILD_TYPE=Release", *args])


def _build(build: Path) -> Path:
    r = _run(["cmake", "--build", build])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return build / "libextension.so"


def test_plain_compiler_is_left_alone(tmp_path):
    r = _configure(tmp_path / "build", f"-DCMAKE_CXX_COMPILER={GXX}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Seastar: libstdc++ is linked shared (libstdc++.so.6, no copy of its own)" in r.stdout, r.stdout
    assert _linkage(_build(tmp_path / "build")) == (True, False)


@pytest.fixture
def archive_first_compiler(tmp_path) -> Path:
    """A g++ wrapper whose -B folder holds libstdc++.a but no libstdc++.so."""
    archive = _static_archive()
    folder = tmp_path / "gcc" / "lib" / "gcc" / "x86_64-linux-gnu" / "13"
    folder.mkdir(parents=True)
    shutil.copy(archive, folder / "libstdc++.a")
    wrapper = tmp_path / "gcc" / "bin" / "g++"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\nexec {GXX} -B{folder}/ "$@"\n')
    wrapper.chmod(0o755)
    # the premise: left to itself, the wrapper links the copy into a shared library
    src = tmp_path / "lib.cpp"
    src.write_text(SOURCE)
    r = _run([wrapper, "-shared", "-fPIC", "-O2", src, "-o", tmp_path / "unfixed.so"])
    assert r.returncode == 0, r.stderr
    assert _linkage(tmp_path / "unfixed.so") == (False, True), "the wrapper did not reproduce the static link"
    return wrapper


def test_compiler_that_finds_the_archive_first_links_the_shared_one(archive_first_compiler, tmp_path):
    r = _configure(tmp_path / "build", f"-DCMAKE_CXX_COMPILER={archive_first_compiler}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shared_dir = Path(_run([GXX, "-print-file-name=libstdc++.so"]).stdout.strip()).parent.resolve()
    assert (f"Seastar: {archive_first_compiler} finds libstdc++.a before libstdc++.so on its own; "
            f"every link gets -L{shared_dir}") in r.stdout, r.stdout
    assert _linkage(_build(tmp_path / "build")) == (True, False)


def test_compiler_that_links_the_archive_whatever_the_path_stops_configuring(tmp_path):
    _static_archive()
    wrapper = tmp_path / "g++"
    wrapper.write_text(f'#!/bin/sh\nexec {GXX} -static-libstdc++ "$@"\n')
    wrapper.chmod(0o755)
    r = _configure(tmp_path / "build", f"-DCMAKE_CXX_COMPILER={wrapper}")
    assert r.returncode != 0, r.stdout[-3000:]
    message = " ".join(r.stderr.split())
    assert f"Seastar: {wrapper} (GNU " in message and "links a copy of libstdc++ into the" in message, message
    assert "also with -L" in message, message
    assert ("Configure a new build folder with a compiler that links the shared libstdc++, e.g. "
            "-DCMAKE_CXX_COMPILER=/usr/bin/g++ (or CXX=/usr/bin/g++)") in message, message


@pytest.mark.parametrize("variable", ["CMAKE_MODULE_LINKER_FLAGS", "CMAKE_SHARED_LINKER_FLAGS"])
def test_static_libstdcxx_flags_stop_configuring(variable, tmp_path):
    _static_archive()  # without it the flag links nothing static, and nothing is wrong
    r = _configure(tmp_path / "build", f"-DCMAKE_CXX_COMPILER={GXX}", f"-D{variable}=-static-libstdc++")
    assert r.returncode != 0, r.stdout[-3000:]
    message = " ".join(r.stderr.split())
    assert f"Seastar: {GXX} (GNU " in message, message
    assert "links a copy of libstdc++ into the" in message and "the flags ask for it (-static-libstdc++)" in message, message
    assert "Remove -static-libstdc++ from CMAKE_CXX_FLAGS and the CMAKE_*_LINKER_FLAGS" in message, message


# ---- the check at import -----------------------------------------------------------------

@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict:
    """Two small libraries that write an unsigned long to an ostream: one with its own libstdc++."""
    _static_archive()
    out = tmp_path_factory.mktemp("libs")
    (out / "lib.cpp").write_text(SOURCE)
    libs = {}
    for name, flags in (("shared", []), ("static", ["-static-libstdc++"])):
        libs[name] = out / f"lib{name}.so"
        r = _run([GXX, "-shared", "-fPIC", "-O2", *flags, out / "lib.cpp", "-o", libs[name]])
        assert r.returncode == 0, r.stderr
    assert _linkage(libs["static"]) == (False, True) and _linkage(libs["shared"]) == (True, False)
    return libs


def test_import_check_finds_a_copy_of_libstdcxx(libraries):
    # in a process of its own: the copy's initialisers run when the library loads
    code = textwrap.dedent("""
        import ctypes, json, sys
        from seastar import _C
        out = {}
        for name, path in json.loads(sys.argv[1]).items():
            ctypes.CDLL(path)
            out[name] = [*_C.libstdcxx_use(path), _C._libstdcxx_import_error(path)]
        out["extension"] = [*_C.libstdcxx_use(_C.__file__), _C._libstdcxx_import_error(_C.__file__)]
        try:
            _C.libstdcxx_use(sys.argv[2])
        except ValueError as e:
            out["not loaded"] = str(e)
        print(json.dumps(out))
    """)
    nowhere = str(libraries["shared"].parent / "libnowhere.so")
    r = _run([sys.executable, "-c", code, json.dumps({k: str(v) for k, v in libraries.items()}), nowhere])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])

    own, where, error = out["static"]
    assert own and where == str(libraries["static"]), out
    assert error.startswith(f"seastar._C ({libraries['static']}) carries its own copy of libstdc++ "
                            "(it defines std::ostream::_M_insert<unsigned long> itself)"), error
    assert "It was built with /" in error and "(GNU " in error, error  # the compiler of this build
    assert "configure a new build folder with -DCMAKE_CXX_COMPILER=/usr/bin/g++" in error, error
    assert "without -static-libstdc++" in error, error

    for name in ("shared", "extension"):
        own, where, error = out[name]
        assert not own and Path(where).name.startswith("libstdc++.so") and error == "", (name, out[name])
    assert out["not loaded"] == f"no library {nowhere} is loaded in this process", out
