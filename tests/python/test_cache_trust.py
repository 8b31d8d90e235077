"""Who may have written the kernel cache (runtime/jit/cache_trust.h, runtime/jit/work_dir.h).

Entries are code the process runs, and their keys only catch damage: a cache folder that others
can write is refused with one error naming it, its owner and mode and the fix; an entry owned by
another user or writable by group or others is never loaded but rebuilt as a private entry (one
warning, like a damaged entry), or, without a compiler, is one clear error. SEASTAR_CACHE_SHARED=1
shares a cache on purpose and warns once. The source is written and compiled in a private folder
held by descriptor, so nothing put in the cache folder, or in the private folder's place, reaches
the compiler.

CI runs as root; another user is made with os.chown (uid 65534), and those cases skip elsewhere.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import cache_entries

OTHER = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")

TINY = """
import json, sys, seastar as ss
src = '// %s\\n#include <cstdint>\\nextern "C" void seastar_entry(const int64_t*, void* const*, void* const*) {}\\n'
print(json.dumps({name: ss._C.jit_compile_cpu(src % name, name) for name in sys.argv[1:]}))
"""


def _run(cache, names, umask=None, **extra) -> subprocess.CompletedProcess:
    """Compiles one tiny source per name in a fresh process; `cache` None: the default folder."""
    env = dict(os.environ, SEASTAR_LOG_LEVEL="info", PYTHONPATH=os.pathsep.join(sys.path))
    for name in ("SEASTAR_CXX", "SEASTAR_CXXFLAGS", "SEASTAR_CACHE_SHARED", "SEASTAR_CACHE_DIR"):
        env.pop(name, None)
    if cache is not None:
        env["SEASTAR_CACHE_DIR"] = str(cache)
    env.update(extra)
    return subprocess.run([sys.executable, "-c", TINY, *names], env=env, capture_output=True, text=True, timeout=600,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def _ok(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def _refused(r: subprocess.CompletedProcess, *parts: str):
    assert r.returncode != 0, r.stdout
    assert "CompileError" in r.stderr and r.stderr.count("Traceback") == 1, r.stderr
    for part in parts:
        assert part in r.stderr, (part, r.stderr)


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777], ids=["world", "group", "sticky"])
def test_a_cache_folder_others_can_write_is_refused(tmp_path, mode):
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    cache.chmod(mode)
    r = _run(cache, ["refused"])
    who = "group" if mode == 0o770 else "group and others"
    _refused(r, f"the kernel cache folder {cache} is writable by {who}", f"mode {mode:04o}",
             f"chmod go-w {cache}", "SEASTAR_CACHE_DIR", "SEASTAR_CACHE_SHARED=1")
    assert not list(cache.iterdir()), "nothing is written to a refused folder"


def test_a_cache_below_a_folder_others_can_write_is_refused(tmp_path):
    above = tmp_path / "open"
    above.mkdir()
    above.chmod(0o777)
    r = _run(above / "kernels", ["refused"])
    _refused(r, f"{above / 'kernels'} is inside {above}, which is writable by group and others",
             f"chmod go-w {above})")


def test_a_sticky_folder_above_is_fine(tmp_path):
    """As /tmp: others may create in it, but not rename or remove what is not theirs."""
    above = tmp_path / "sticky"
    above.mkdir()
    above.chmod(0o1777)
    out = _ok(_run(above / "kernels", ["sticky"]))
    assert not out["sticky"]["cache_hit"]


@needs_root
def test_a_cache_folder_of_another_user_is_refused(tmp_path):
    cache = tmp_path / "theirs"
    cache.mkdir()
    os.chown(cache, OTHER, OTHER)
    _refused(_run(cache, ["refused"]), f"the kernel cache folder {cache} is owned by uid {OTHER}", "mode 0755",
             "SEASTAR_CACHE_DIR")
    mine = cache / "kernels"
    mine.mkdir()
    os.chown(mine, 0, 0)
    _refused(_run(mine, ["refused"]), f"{mine} is inside {cache}, which is owned by uid {OTHER}")


def test_new_folders_and_entries_are_private(tmp_path):
    """The default folder (and those above it that did not exist) 0700, entries 0600 and 0700,
    whatever the umask."""
    home = tmp_path / "home"
    home.mkdir()
    r = _run(None, ["private"], umask=0, HOME=str(home), XDG_CACHE_HOME="")
    out = _ok(r)
    cache = home / ".cache" / "seastar" / "kernels"
    assert Path(out["private"]["path"]).parent == cache
    for d in (home / ".cache", home / ".cache" / "seastar", cache):
        assert _mode(d) == 0o700, (d, oct(_mode(d)))
    modes = {p.suffix: _mode(p) for p in cache.iterdir()}
    assert modes == {".so": 0o700, ".cpp": 0o600, ".index": 0o600, ".target": 0o600}, modes
    cache_entries.check_dir(cache)


def _untrust(p: Path, how: str):
    if how == "foreign":
        os.chown(p, OTHER, OTHER)
    else:
        p.chmod(0o770 if how == "group_writable" else 0o702)


def test_entries_others_could_have_written_are_rebuilt_as_private_entries(tmp_path):
    """Not loaded: rebuilt in place (a rename over them, in a folder that is the user's), with one
    warning each that names the entry, its owner and mode."""
    hows = ["group_writable", "other_writable"] + (["foreign"] if os.geteuid() == 0 else [])
    names = hows + ["intact"]
    cache = tmp_path / "kernels"
    cold = _ok(_run(cache, names))
    path = {n: Path(v["path"]) for n, v in cold.items()}
    for how in hows:
        _untrust(path[how], how)
    r = _run(cache, names)
    warm = _ok(r)
    assert [n for n in names if not warm[n]["cache_hit"]] == hows, r.stderr
    assert r.stderr.count("is unusable") == len(hows) and r.stderr.count("compiling") == len(hows), r.stderr
    assert f"{path['group_writable']} is unusable (it is writable by group (owner uid" in r.stderr, r.stderr
    assert "mode 0770" in r.stderr and "writable by others" in r.stderr, r.stderr
    if "foreign" in hows:
        assert f"{path['foreign']} is unusable (it is owned by uid {OTHER}" in r.stderr, r.stderr
    for n in names:
        assert warm[n]["path"] == str(path[n])
        st = path[n].lstat()
        assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700, (n, st)
    cache_entries.check_dir(cache)
    again = _run(cache, names)
    assert all(v["cache_hit"] for v in _ok(again).values()) and "is unusable" not in again.stderr, again.stderr


def test_an_entry_others_could_have_written_without_a_compiler_is_one_clear_error(tmp_path):
    cache = tmp_path / "kernels"
    so = Path(_ok(_run(cache, ["nocompiler"]))["nocompiler"]["path"])
    so.chmod(0o777)
    r = _run(cache, ["nocompiler"], SEASTAR_CXX="/nonexistent/g++")
    _refused(r, "/nonexistent/g++", f"{so}: it is writable by group and others", "mode 0777")
    assert not so.exists(), "the entry that cannot be trusted is removed"


def test_the_shared_opt_in_allows_a_shared_folder_and_warns_once(tmp_path):
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    cache.chmod(0o777)
    warning = "SEASTAR_CACHE_SHARED=1: the kernel cache"
    r = _run(cache, ["s1", "s2"], SEASTAR_CACHE_SHARED="1")
    cold = _ok(r)
    assert r.stderr.count(warning) == 1 and "anyone who can write there can run their code" in r.stderr, r.stderr
    # readable by the others who share it, writable by no one else
    modes = {p.name.split("-")[0] + p.suffix: _mode(p) for p in cache.iterdir() if not p.name.startswith("toolchain")}
    assert modes == {"s1.so": 0o755, "s2.so": 0o755, "s1.cpp": 0o644, "s2.cpp": 0o644, "s1.index": 0o644,
                     "s2.index": 0o644}, modes
    # another user's entry, which anyone may write, is loaded as it is
    theirs = Path(cold["s1"]["path"])
    theirs.chmod(0o666)
    if os.geteuid() == 0:
        os.chown(theirs, OTHER, OTHER)
    r = _run(cache, ["s1", "s2"], SEASTAR_CACHE_SHARED="1")
    assert all(v["cache_hit"] for v in _ok(r).values()), r.stderr
    assert r.stderr.count(warning) == 1 and "is unusable" not in r.stderr, r.stderr
    cache_entries.check_dir(cache)
    # without the opt-in, the same folder is refused
    _refused(_run(cache, ["s1"]), f"the kernel cache folder {cache} is writable by group and others")
    r = _run(cache, ["s1"], SEASTAR_CACHE_SHARED="yes")
    assert r.returncode != 0 and "ValueError" in r.stderr and "SEASTAR_CACHE_SHARED='yes'" in r.stderr, r.stderr


SWAPPING_CXX = """#!/bin/sh
# g++, except that before compiling it does what anyone who can write to the cache folder could:
# it puts its own source wherever a name might lead the compiler
case " $* " in *" -o "*)
  for a in "$@"; do case "$a" in *.cpp) src=$a;; esac; done
  here=$(pwd -P)
  {
    echo "src=$src"
    echo "cwd=$here"
    stat -c 'cwd_stat=%a %u' .
    stat -c 'src_stat=%a %u' "$src"
    ls "$SEASTAR_CACHE_DIR" | sed 's/^/listed=/'
  } > "$SWAP_REPORT"
  # the name the source will be kept under, in the cache folder
  printf '#error INJECTED in the cache folder\\n' > "$SEASTAR_CACHE_DIR/$(basename "$src")"
  # the private folder's name: the folder moved away, one with another source in its place
  # (only a folder inside the cache: a compiler run elsewhere is reported, not moved)
  case "$here" in "$(cd "$SEASTAR_CACHE_DIR" && pwd -P)"/*)
    mv "$here" "$here.moved"
    mkdir "$here"
    printf '#error INJECTED in place of the private folder\\n' > "$here/$(basename "$src")";;
  esac
  ;;
esac
exec g++ "$@"
"""


def test_a_source_swapped_before_the_compiler_reads_it_never_reaches_it(tmp_path):
    cxx = tmp_path / "swapping-cxx"
    cxx.write_text(SWAPPING_CXX)
    cxx.chmod(0o755)
    report = tmp_path / "report"
    cache = tmp_path / "kernels"
    r = _run(cache, ["swapped"], SEASTAR_CXX=str(cxx), SWAP_REPORT=str(report))
    out = _ok(r)
    assert "INJECTED" not in r.stderr and not out["swapped"]["cache_hit"], r.stderr
    lines = report.read_text().splitlines()
    seen = dict(line.split("=", 1) for line in lines if not line.startswith("listed="))
    listed = [line.split("=", 1)[1] for line in lines if line.startswith("listed=")]
    so = Path(out["swapped"]["path"])
    # the compiler was given a name in its private working folder, not a path into the cache folder
    assert seen["src"] == so.with_suffix(".cpp").name, seen
    assert Path(seen["cwd"]).parent == cache and ".tmp." in Path(seen["cwd"]).name, seen
    assert seen["cwd_stat"] == f"700 {os.geteuid()}" and seen["src_stat"] == f"600 {os.geteuid()}", seen
    assert not [n for n in listed if n.endswith(".cpp")], listed  # no source in the cache folder meanwhile
    # what is kept to read is the source that was compiled, and the entry loads again
    kept = so.with_suffix(".cpp").read_text()
    assert "INJECTED" not in kept and "seastar_kernel_key" in kept
    assert "was renamed or replaced while a kernel compiled in it" in r.stderr, r.stderr
    work = Path(seen["cwd"])
    assert not list(Path(str(work) + ".moved").iterdir()), "the private folder's files are removed wherever it went"
    Path(str(work) + ".moved").rmdir()
    (work / so.with_suffix(".cpp").name).unlink()
    work.rmdir()
    cache_entries.check_dir(cache)
    assert _ok(_run(cache, ["swapped"], SEASTAR_CXX=str(cxx), SWAP_REPORT=str(report)))["swapped"]["cache_hit"]
