"""The NVRTC cubin cache under faults (runtime/cuda/nvrtc_compiler.cpp): compiled without a GPU.

A damaged cubin used to be handed to the driver as it was; now each entry verifies itself
(runtime/jit/kernel_cache.h) and a bad one is rebuilt once with a warning.
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
import json, sys, seastar as ss
out = {}
for i, name in enumerate(sys.argv[2:]):
    src = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = %d.0f * p[threadIdx.x]; }' % (i + 1)
    r = ss._C.nvrtc_compile(src, int(sys.argv[1]), name)
    out[name] = dict(hit=r["cache_hit"], size=r["size"], path=r["path"], kernels=r["kernels"])
print(json.dumps(out))
"""
# an architecture above every NVRTC's: PTX for the newest one it knows
PTX_ARCH = 999


def _run(cache: Path, names=NAMES, arch: int = 80):
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), SEASTAR_LOG_LEVEL="info", PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(arch), *names], env=env, capture_output=True, text=True,
                       timeout=600)
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


RESEALED = ["forged", "half", "noise", "no_symbol", "intact"]


@pytest.mark.parametrize("arch", [80, PTX_ARCH], ids=["cubin", "ptx"])
def test_an_image_resealed_under_another_key_is_rebuilt(tmp_path, arch):
    """Valid trailers around the wrong code: another program's image (it would run on this
    program's buffers), its own image cut in half or replaced by noise, an image without the key
    symbol. Only the key the image carries in its code tells; reading it never crashes."""
    cache = tmp_path / "kernels"
    cold, _ = _run(cache, RESEALED, arch)
    path = {n: Path(v["path"]) for n, v in cold.items()}
    assert {p.suffix for p in path.values()} == {".ptx" if arch == PTX_ARCH else ".cubin"}
    own = {n: cache_entries.split(p.read_bytes()) for n, p in path.items()}
    keys = {n: cache_entries.key_of(p) for n, p in path.items()}
    assert all(keys[n].encode() in own[n][0] for n in RESEALED)  # the image spells out its key

    def reseal(name, obj):
        path[name].write_bytes(cache_entries.seal(obj, keys[name], own[name][1]))

    reseal("forged", own["intact"][0])
    # half an image: a cubin's first half (its section table, at the end, is cut off), PTX's
    # second half (its globals come first). A PTX image cut after its key still carries it: the
    # trailer finds such damage, and the driver rejects the PTX with an error when it loads it.
    image = own["half"][0]
    reseal("half", image[len(image) // 2:] if arch == PTX_ARCH else image[: len(image) // 2])
    reseal("noise", os.urandom(len(own["noise"][0])))
    reseal("no_symbol", own["no_symbol"][0].replace(b"seastar_kernel_key", b"seastar_kernel_kez"))
    warm, err = _run(cache, RESEALED, arch)
    assert [n for n in RESEALED if not warm[n]["hit"]] == RESEALED[:-1], err
    assert err.count("is unusable") == 4, err
    assert f"its code was built for key {keys['intact']}" in err, err
    assert err.count("its code carries no seastar_kernel_key") == 3, err
    for n in RESEALED:
        assert warm[n]["size"] == cold[n]["size"], n
    cache_entries.check_dir(cache)
    again, err = _run(cache, RESEALED, arch)
    assert all(v["hit"] for v in again.values()) and "is unusable" not in err, err


def test_a_cubin_without_its_register_report_is_rebuilt(tmp_path):
    """An entry whose trailer lost ptxas's report (its log field) would list no kernels; it is
    rebuilt, so callers always get each kernel's registers."""
    cache = tmp_path / "kernels"
    cold, _ = _run(cache, ["intact", "no_log"])
    path = Path(cold["no_log"]["path"])
    obj, fields = cache_entries.split(path.read_bytes())
    path.write_bytes(cache_entries.seal(obj, cache_entries.key_of(path), {k: v for k, v in fields.items() if k != "log"}))
    warm, err = _run(cache, ["intact", "no_log"])
    assert warm["intact"]["hit"] and not warm["no_log"]["hit"], err
    assert "holds no register report" in err, err
    assert warm["no_log"]["kernels"] == cold["no_log"]["kernels"] and cold["no_log"]["kernels"], warm
    cache_entries.check_dir(cache)


def test_reading_the_key_of_mangled_cubins_never_crashes(tmp_path):
    """Cubins with bytes of their ELF header, section table and symbol table overwritten, each
    resealed under its own key: the reader takes the key or finds none, and never reads out of
    bounds (a crash would fail the run)."""
    import random

    names = [f"m{i}" for i in range(24)]
    cache = tmp_path / "kernels"
    cold, _ = _run(cache, names)
    rng = random.Random(7)
    for n in names:
        p = Path(cold[n]["path"])
        obj, fields = cache_entries.split(p.read_bytes())
        data = bytearray(obj)
        shoff = int.from_bytes(data[0x28:0x30], "little")
        for _ in range(rng.randint(1, 6)):  # the header, the section table, or anywhere
            at = rng.choice([rng.randrange(0x40), rng.randrange(shoff, len(data)), rng.randrange(len(data))])
            data[at] = rng.choice([0, 0xFF, rng.randrange(256)])
        p.write_bytes(cache_entries.seal(bytes(data), cache_entries.key_of(p), fields))
    warm, err = _run(cache, names)
    rebuilt = [n for n in names if not warm[n]["hit"]]
    assert err.count("is unusable") == len(rebuilt), err
    cache_entries.check_dir(cache)


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


def test_images_others_could_have_written_are_rebuilt_and_a_shared_folder_is_refused(tmp_path):
    """The trust rules of the host JIT's cache (runtime/jit/cache_trust.h) hold for CUDA images too:
    an image owned by another user or writable by group or others never reaches the driver but
    is rebuilt as a private entry, and a folder others can write is refused before NVRTC runs."""
    import stat as st

    names = ["writable"] + (["foreign"] if os.geteuid() == 0 else []) + ["intact"]
    cache = tmp_path / "kernels"
    cold, _ = _run(cache, names)
    path = {n: Path(v["path"]) for n, v in cold.items()}
    assert st.S_IMODE(path["intact"].stat().st_mode) == 0o600
    path["writable"].chmod(0o666)
    if "foreign" in names:
        os.chown(path["foreign"], 65534, 65534)
    warm, err = _run(cache, names)
    assert [n for n in names if not warm[n]["hit"]] == names[:-1], err
    assert f"{path['writable']} is unusable (it is writable by group and others" in err, err
    if "foreign" in names:
        assert f"{path['foreign']} is unusable (it is owned by uid 65534" in err, err
    for n in names:
        info = path[n].stat()
        assert info.st_uid == os.geteuid() and st.S_IMODE(info.st_mode) == 0o600, n
    cache_entries.check_dir(cache)

    cache.chmod(0o777)
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", SCRIPT, "80", "intact"], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0 and "CompileError" in r.stderr, r.stderr
    assert f"the kernel cache folder {cache} is writable by group and others" in r.stderr, r.stderr
