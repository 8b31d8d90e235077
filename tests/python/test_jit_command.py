"""How the host compiler is run and keyed (runtime/jit/subprocess.cpp, runtime/jit/host_toolchain.cpp).

No shell: program names, the cache directory and SEASTAR_CXX reach the compiler as argument
words. Before, they went through popen: ``name='x;touch INJECTED;y'`` ran ``touch``, a
``lambda`` (named ``<lambda>``) and a cache directory with a space failed to compile.
The cache key includes the compiler command, its version, the flags (SEASTAR_CXXFLAGS too) and
what ``-march=native`` resolves to; SEASTAR_CXX may hold a command with flags.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cache_entries
import seastar as ss

NASTY_NAMES = ["x;touch INJECTED;y", "$(touch INJECTED)", "`touch INJECTED`", "a b 'c' \"d\"", "größe-λ",
               "../../escape", "-rf", ".hidden", "", "n" * 300, "tab\tnew\nline|pipe&amp>out<in*?"]


def _tiny(tag: str) -> str:
    """The smallest source the JIT accepts (compiles in a fraction of a second)."""
    return (f"// {tag}\n#include <cstdint>\n"
            'extern "C" void seastar_entry(const int64_t*, void* const*, void* const*) {}\n')


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "a cache dir with spaces; and $(touch INJECTED)"
    monkeypatch.setenv("SEASTAR_CACHE_DIR", str(d))
    monkeypatch.delenv("SEASTAR_CXX", raising=False)
    monkeypatch.delenv("SEASTAR_CXXFLAGS", raising=False)
    monkeypatch.chdir(tmp_path)
    return d


def _no_injection(root: Path):
    hits = [str(p) for p in root.rglob("INJECTED*") if p.is_file()]
    assert not hits, hits


def test_names_are_file_names_not_shell_syntax(cache, tmp_path):
    paths = set()
    for i, name in enumerate(NASTY_NAMES):
        r = ss._C.jit_compile_cpu(_tiny(f"name {i}"), name)
        p = Path(r["path"])
        assert p.parent == cache and p.is_file(), r
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}-[0-9a-f]{16}\.so", p.name), p.name
        paths.add(p)
    assert len(paths) == len(NASTY_NAMES)
    _no_injection(tmp_path)
    cache_entries.check_dir(cache)


def test_programs_with_shell_names_and_lambdas_run(tmp_path):
    """End to end through the fused backend, in a fresh process (and cwd) with a spaced cache."""
    cache = tmp_path / "cache dir" / "kernels"
    script = (
        "import torch, seastar as ss\n"
        "g = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)\n"
        "h = torch.tensor([[1.0], [2.0]])\n"
        "named = ss.vertex_program(lambda v: sum(e.src.h * 2.0 for e in v.in_edges()), name='x;touch INJECTED;y')\n"
        "anon = ss.vertex_program(lambda v: sum(e.src.h * 3.0 for e in v.in_edges()))\n"
        "print(named(g, backend='fused', h=h).tolist(), anon(g, backend='fused', h=h).tolist())\n"
    )
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("SEASTAR_CXX", None)
    r = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "[[4.0], [2.0]] [[6.0], [3.0]]" in r.stdout
    _no_injection(tmp_path)
    names = sorted(p.name for p in cache.glob("*.so"))
    assert any(n.startswith("x_touch_INJECTED_y") for n in names), names
    assert any(n.startswith("_lambda_") for n in names), names


def test_seastar_cxx_may_hold_a_command_with_flags(cache, monkeypatch):
    monkeypatch.setenv("SEASTAR_CXX", "g++ -DSEASTAR_FROM_CXX=1")
    src = _tiny("cxx words") + "#ifndef SEASTAR_FROM_CXX\n#error SEASTAR_CXX's flags were not passed\n#endif\n"
    assert not ss._C.jit_compile_cpu(src, "cxx_words")["cache_hit"]


def test_cxxflags_reach_the_compiler_and_the_key(cache, monkeypatch):
    src = _tiny("cxxflags") + "#ifdef SEASTAR_TEST_FLAG\nint flagged = SEASTAR_TEST_FLAG;\n#endif\n"
    plain = ss._C.jit_compile_cpu(src, "flags")
    monkeypatch.setenv("SEASTAR_CXXFLAGS", "-DSEASTAR_TEST_FLAG=1")
    flagged = ss._C.jit_compile_cpu(src, "flags")
    assert plain["path"] != flagged["path"] and not flagged["cache_hit"]
    monkeypatch.setenv("SEASTAR_CXXFLAGS", "-fno-such-flag-seastar")
    with pytest.raises(ss.CompileError, match="fno-such-flag-seastar"):
        ss._C.jit_compile_cpu(src, "flags")


def test_the_entry_records_the_compiler_and_the_resolved_target(cache):
    r = ss._C.jit_compile_cpu(_tiny("fields"), "fields")
    _, fields = cache_entries.split(Path(r["path"]).read_bytes())
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert fields["compiler"] == version
    march = re.search(r"-march=\s+(\S+)", subprocess.run(["g++", "-march=native", "-Q", "--help=target"],
                                                          capture_output=True, text=True).stdout)
    assert march and f"-march={march.group(1)}" in fields["target"], fields["target"]


FAKE_CXX = """#!/bin/sh
# g++, except that it reports $FAKE_VERSION and $FAKE_MARCH when probed
for a in "$@"; do
  [ "$a" = --version ] && { echo "$FAKE_VERSION"; exit 0; }
  [ "$a" = --help=target ] && { echo "  -march=                     $FAKE_MARCH"; exit 0; }
done
exec g++ "$@"
"""


def test_the_key_changes_with_the_compiler_version_and_target(tmp_path):
    """Each probe in a fresh process: a process probes its compiler once."""
    cxx = tmp_path / "fake-cxx"
    cxx.write_text(FAKE_CXX)
    cxx.chmod(0o755)
    cache = tmp_path / "kernels"
    script = "import seastar as ss; print(ss._C.jit_compile_cpu(%r, 'probe')['path'])" % _tiny("versions")

    def path(version, march):
        for p in cache.glob("toolchain-*.target"):  # the remembered target stands for the real CPU's
            p.unlink()
        env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), SEASTAR_CXX=str(cxx), FAKE_VERSION=version,
                   FAKE_MARCH=march, PYTHONPATH=os.pathsep.join(sys.path))
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    base = path("g++ (Fake) 1.0", "cpu-a")
    assert path("g++ (Fake) 1.0", "cpu-a") == base
    assert path("g++ (Fake) 2.0", "cpu-a") != base
    assert path("g++ (Fake) 1.0", "cpu-b") != base
