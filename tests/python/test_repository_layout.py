"""The repository keeps its layout. The C++ sources keep the layering docs/ARCHITECTURE.md draws
("Folders and libraries"): a file includes project headers only from its own layer or the layers
below it, so every arrow of the include graph points down. tests/README.md lists every test
file. Read from the source tree; nothing is built."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# bottom first; a folder may include from its own rank and every lower one
LAYERS = [
    ("core/util",), ("core/ir", "core/graph", "core/sampling"), ("core/frontend", "core/passes"),
    ("codegen",), ("runtime/cpu",), ("runtime/jit",), ("runtime/cuda",), ("runtime/engine",),
    ("api",), ("include/seastar", "python/src", "examples/cpp"),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rank(path: str) -> int | None:
    for i, folders in enumerate(LAYERS):
        if any(path == f or path.startswith(f + "/") for f in folders):
            return i
    return None


def project_includes():
    for folder in ("core", "codegen", "runtime", "api", "python/src", "include/seastar", "examples/cpp"):
        for f in sorted((ROOT / folder).rglob("*")):
            if f.suffix in (".h", ".cpp", ".cuh") and f.is_file():
                rel = f.relative_to(ROOT).as_posix()
                for inc in INCLUDE.findall(f.read_text()):
                    yield rel, inc


def test_the_layers_cover_every_source_folder():
    unranked = {rel.rsplit("/", 1)[0] for rel, _ in project_includes() if rank(rel) is None}
    # runtime/device holds the headers generated kernels include: they include only each other
    assert unranked <= {"runtime/device"}, f"folders missing from LAYERS: {sorted(unranked)}"


def test_no_include_points_up():
    upward = []
    for rel, inc in project_includes():
        if not (ROOT / inc).is_file():
            continue  # a sibling of the device headers, a generated header or a system one
        here, there = rank(rel), rank(inc)
        if here is not None and there is not None and there > here:
            upward.append(f"{rel} includes {inc}")
    assert not upward, "includes that point up a layer:\n" + "\n".join(upward)


def test_an_upward_include_would_be_found():
    assert rank("core/ir/ir.h") < rank("codegen/plan.h") < rank("runtime/jit/compiler.h") \
        < rank("runtime/engine/program_core.h") < rank("api/program.h")


def test_the_tests_readme_lists_every_test_file():
    readme = (ROOT / "tests" / "README.md").read_text()
    tests = ROOT / "tests"
    unlisted = [f.relative_to(tests).as_posix() for f in sorted(tests.rglob("test_*"))
                if f.suffix in (".py", ".cpp") and f.parent.name in ("python", "cpp", "compat", "gpu")
                and f.relative_to(tests).as_posix() not in readme]
    assert not unlisted, "tests/README.md does not list: " + ", ".join(unlisted)
