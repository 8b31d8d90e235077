"""The repository keeps its layout. The C++ sources keep the layering docs/ARCHITECTURE.md draws
("Folders and libraries"): a file includes project headers only from its own layer or the layers
below it, so every arrow of the include graph points down. tests/README.md lists every test
file. The Python package's imports form no circle and sit at the top of their modules. Read from
the source tree; nothing is built."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# bottom first; a folder may include from its own rank and every lower one
LAYERS = [
    ("core/util",), ("core/ir", "core/graph", "core/sampling"), ("core/frontend", "core/passes"),
    ("kernels/cpu",), ("codegen",), ("runtime/cpu",), ("runtime/jit",), ("runtime/cuda",), ("runtime/engine",),
    ("api",), ("include/seastar", "python/src", "examples/cpp"),
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
INCLUDE_ANY = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]', re.M)


def rank(path: str) -> int | None:
    for i, folders in enumerate(LAYERS):
        if any(path == f or path.startswith(f + "/") for f in folders):
            return i
    return None


def project_includes(pattern=INCLUDE):
    for folder in ("core", "kernels", "codegen", "runtime", "api", "python/src", "include/seastar", "examples/cpp"):
        for f in sorted((ROOT / folder).rglob("*")):
            if f.suffix in (".h", ".cpp", ".cuh") and f.is_file():
                rel = f.relative_to(ROOT).as_posix()
                for inc in pattern.findall(f.read_text()):
                    yield rel, inc


def project_includes_any():
    """Project and system includes (<...> as well as "...")."""
    return project_includes(INCLUDE_ANY)


def test_the_layers_cover_every_source_folder():
    unranked = {rel.rsplit("/", 1)[0] for rel, _ in project_includes() if rank(rel) is None}
    # kernels/device holds the headers generated CUDA kernels include: they include only each other
    assert unranked <= {"kernels/device"}, f"folders missing from LAYERS: {sorted(unranked)}"


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
    assert rank("core/ir/ir.h") < rank("kernels/cpu/row_gather.h") < rank("codegen/plan.h") \
        < rank("runtime/jit/compiler.h") < rank("runtime/engine/program_core.h") < rank("api/program.h")


def test_the_libraries_include_only_the_torch_headers_they_use():
    """<torch/torch.h> is the whole C++ front end (nn, optim, data, serialization): parsing it
    doubles a library file's compile. Examples, tests and the bindings may include it."""
    whole = [rel for rel, inc in project_includes_any() if inc == "torch/torch.h"
             and rel.split("/")[0] in ("core", "kernels", "codegen", "runtime", "api")]
    assert not whole, f"library files that include <torch/torch.h>: {whole}"


def test_kernel_code_lives_in_kernels_not_runtime():
    """runtime/ compiles, caches, loads and launches kernels; the code that runs on the data (device
    headers, the CPU kernels' headers, hand-written loops) is under kernels/."""
    runtime = sorted((ROOT / "runtime").rglob("*"))
    assert not [f for f in runtime if f.suffix in (".cu", ".cuh")]
    loops = [f.relative_to(ROOT).as_posix() for f in runtime
             if f.suffix in (".h", ".cpp") and re.search(r"^\s*#\s*pragma\s+omp", f.read_text(), re.M)]
    assert not loops, f"hand-written kernels under runtime/: {loops}"
    assert (ROOT / "kernels" / "device" / "seastar_device.cuh").is_file()
    assert (ROOT / "kernels" / "cpu" / "seastar_cpu_math.h").is_file()


def test_the_tests_readme_lists_every_test_file():
    readme = (ROOT / "tests" / "README.md").read_text()
    tests = ROOT / "tests"
    unlisted = [f.relative_to(tests).as_posix() for f in sorted(tests.rglob("test_*"))
                if f.suffix in (".py", ".cpp") and f.parent.name in ("python", "cpp", "compat", "gpu")
                and f.relative_to(tests).as_posix() not in readme]
    assert not unlisted, "tests/README.md does not list: " + ", ".join(unlisted)


# -- the Python package: its imports form no circle --------------------------------------------
PACKAGE = ROOT / "python" / "seastar"
# imports that stay inside functions on purpose: the build's version (a clear error when the
# package is not built), and seastar.distributed's parts that load torch.distributed on first use
DEFERRED = {"seastar._torch_check": {"seastar._version"},
            "seastar.distributed": {"seastar.distributed.halo", "seastar.distributed.fullgraph",
                                    "seastar.distributed.minibatch", "seastar.distributed.checkpoint",
                                    "seastar.distributed.feature_cache", "seastar.distributed.planner",
                                    "seastar.distributed.calibration"}}


def _modules():
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def _imports(mods):
    """module -> [(imported package module, inside a function)], without ``if TYPE_CHECKING:``."""
    edges = {}
    for name, f in mods.items():
        tree = ast.parse(f.read_text())
        is_pkg = f.name == "__init__.py"
        found = []

        def visit(node, in_function):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and getattr(child.test, "id", "") == "TYPE_CHECKING":
                    continue
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                if isinstance(child, ast.ImportFrom):
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    if child.level:
                        base = base[:len(base) - (child.level - 1)]
                        mod = ".".join(base + ([child.module] if child.module else []))
                    else:
                        mod = child.module or ""
                    for alias in child.names:
                        target = f"{mod}.{alias.name}"
                        found.append((target if target in mods else mod, inner))
                elif isinstance(child, ast.Import):
                    found.extend((a.name, inner) for a in child.names)
                visit(child, inner)

        visit(tree, False)
        # importing a submodule runs its package's __init__ first: not an edge of its own
        edges[name] = [(t, inner) for t, inner in found
                       if t in mods and t != name and not name.startswith(t + ".")]
    return edges


def _circles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            connect(v)
    return out


def test_the_package_imports_form_no_circle():
    edges = _imports(_modules())
    circles = _circles({m: {t for t, _ in ts} for m, ts in edges.items()})
    assert not circles, f"import circles: {circles}"


def test_package_imports_sit_at_the_top_of_their_modules():
    deferred = {f"{m} imports {t}" for m, ts in _imports(_modules()).items() for t, inner in ts
                if inner and t not in DEFERRED.get(m, set())}
    assert not deferred, "imports inside functions (a circle they hide, or move them up):\n" + "\n".join(sorted(deferred))


def test_a_circle_would_be_found():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
