"""The documentation site (docs/, scripts/docs.sh): it builds with no warning and nitpicky
references, its API reference lists every public name of each public module's ``__all__`` and the C++
reference every public name of the C++ headers, every
Python code block of its pages runs as written (a page's blocks in order, in one fresh process,
from an empty folder), and, where Chromium is installed, its index and tutorial render with the
theme's stylesheet loaded. Skips without Sphinx (scripts/test.sh installs docs/requirements.txt)."""
from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PUBLIC_MODULES = ["seastar", "seastar.nn", "seastar.loader", "seastar.datasets", "seastar.distributed"]
NOT_RUN = re.compile(r"^# not run: \S")

pytest.importorskip("sphinx", reason="Sphinx is not installed (pip install -r docs/requirements.txt)")


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT / "python"), SEASTAR_LOG_LEVEL="warn")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "html"
    r = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-q",
                        "-d", str(out / ".doctrees"), str(DOCS), str(out)],
                       capture_output=True, text=True, timeout=600, env=_env(), cwd=ROOT)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return out


# the headers a C++ program includes (<seastar/seastar.h>), and the page that names what they declare
CPP_HEADERS = ["api/program.h", "api/nn.h", "core/graph/graph.h", "core/frontend/builder.h", "core/util/errors.h"]
CPP_NOT_NAMES = {"if", "for", "while", "switch", "return", "sizeof", "static_assert", "decltype", "TORCH_ARG",
                 "TORCH_MODULE"}


def cpp_public_names(text: str) -> set:
    """Classes, structs, functions and members a C++ header declares outside private sections and
    function bodies, with the options of TORCH_ARG and the modules of TORCH_MODULE (a line-based
    reading of the project's own style, not a C++ parser)."""
    text = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
    names, scopes, pending = set(), [], None  # scopes: (kind, access) per open brace
    for line in (raw.strip() for raw in text.splitlines()):
        if not line or line.startswith("#"):
            continue
        visible = all(kind != "body" and access == "public" for kind, access in scopes)
        declared = re.match(r"(?:template\s*<[^>]*>\s*)?(class|struct)\s+(\w+)\b([^;]*)$", line)
        if declared and visible:
            names.add(declared.group(2))
            pending = declared.group(1)
        access = re.match(r"(public|private|protected)\s*:(?!:)", line)
        if access and scopes and scopes[-1][0] == "class":
            scopes[-1] = ("class", "public" if access.group(1) == "public" else "private")
        if visible and not declared:
            names.update(re.findall(r"TORCH_ARG\([^,]+,\s*(\w+)\)", line))
            names.update(re.findall(r"TORCH_MODULE\((\w+)\)", line))
            fn = re.match(r"(?:(?:explicit|static|inline|virtual|constexpr|friend)\s+)*(?:[\w:<>,*&]+\s+)*?[*&]?(~?\w+)\s*\(",
                          line)
            if fn and fn.group(1) not in CPP_NOT_NAMES and "operator" not in line.split("(")[0] \
                    and not line.startswith(("return", "using", "namespace")) and not re.match(r"\w+\s*=", line):
                names.add(fn.group(1))
        for ch in line:
            if ch == "{":
                if pending:
                    scopes.append(("class", "private" if pending == "class" else "public"))
                    pending = None
                else:
                    outer = line.startswith("namespace") and all(kind == "namespace" for kind, _ in scopes)
                    scopes.append(("namespace" if outer else "body", "public"))
            elif ch == "}" and scopes:
                scopes.pop()
        if pending and line.endswith(";") and "{" not in line:
            pending = None  # a forward declaration
    return names


def test_the_cpp_reference_names_every_public_name_of_the_headers():
    page = (DOCS / "cpp_reference.md").read_text()
    spans = " ".join(re.findall(r"`([^`]+)`", page))
    missing = {h: sorted(n for n in cpp_public_names((ROOT / h).read_text()) if not re.search(rf"\b{n}\b", spans))
               for h in CPP_HEADERS}
    assert not any(missing.values()), f"docs/cpp_reference.md does not name: {missing}"


def test_the_cpp_reference_check_finds_a_new_name():
    header = "namespace seastar {\nclass Shown {\n public:\n  int listed() const;\n private:\n  int hidden_;\n" \
             "  void secret();\n};\nVar new_op(const Var& x);\n}  // namespace seastar\n"
    assert cpp_public_names(header) == {"Shown", "listed", "new_op"}
    assert "Program" in cpp_public_names((ROOT / "api/program.h").read_text())


def test_site_builds_with_no_warning(site):
    for page in ("index", "quickstart", "tutorial/write_a_layer", "language", "api", "benchmarks"):
        assert (site / f"{page}.html").stat().st_size > 2000, page
    assert (site / "_images" / "peers_speed.png").stat().st_size > 5000


def test_the_api_reference_lists_every_public_name(site):
    from sphinx.util.inventory import InventoryFile

    with open(site / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", os.path.join)
    documented = {name for kind, entries in inv.items() if kind.startswith("py:") for name in entries}
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert hasattr(module, "__all__"), f"{module_name} has no __all__"
        for name in module.__all__:
            if f"{module_name}.{name}" not in documented:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"public names missing from the API reference: {missing}"


def _pages():
    return sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "_generated" not in p.parts)


def python_blocks(page: Path):
    """The page's ```python blocks, in order, without those whose first line is
    ``# not run: <reason>``."""
    blocks, block = [], None
    for line in page.read_text().splitlines():
        if block is None and line.strip() == "```python":
            block = []
        elif block is not None and line.strip() == "```":
            if not (block and NOT_RUN.match(block[0])):
                blocks.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(line)
    return blocks


@pytest.mark.parametrize("page", [p for p in _pages() if python_blocks(p)], ids=lambda p: str(p.relative_to(DOCS)))
def test_code_blocks_run_as_written(page, tmp_path):
    code = "\n\n".join(python_blocks(page))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=_env(),
                       cwd=tmp_path)
    assert r.returncode == 0, f"{page.name}:\n{r.stderr[-5000:]}"
    # no warning of Seastar's own (torch's, such as torch.export.load's, are torch's to fix)
    ours = re.findall(r"python/seastar/[^:\n]+:\d+: \w*Warning.*", r.stderr)
    assert not ours, ours


def test_a_block_marked_not_run_says_why():
    for page in _pages():
        for line in page.read_text().splitlines():
            if line.startswith("# not run"):
                assert NOT_RUN.match(line), f"{page.name}: {line!r} gives no reason"


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (Debian: apt-get install chromium)")
@pytest.mark.parametrize("page", ["index", "tutorial/write_a_layer", "benchmarks"])
def test_pages_render_in_a_browser(site, page, tmp_path):
    """A headless Chromium screenshot of the page is not blank, and the page's own rendering
    shows furo's stylesheet applied (the sidebar is laid out beside the content); the benchmarks
    page shows its figures."""
    shot = tmp_path / "page.png"
    r = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={shot}", "--window-size=1280,900", (site / f"{page}.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.stat().st_size > 0, r.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.std() > 0.02, "the screenshot is blank"
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          (site / f"{page}.html").as_uri()], capture_output=True, text=True, timeout=120).stdout
    css = re.findall(r'href="([^"]*furo[^"]*\.css)', dom)
    assert css and all((site / page).parent.joinpath(c).resolve().is_file() for c in css), css
    if page == "benchmarks":  # the figures drawn from the committed results are on the page, and not empty
        figures = re.findall(r'<img[^>]*src="([^"]+\.png)"', dom)
        assert figures and all((site / page).parent.joinpath(f).resolve().stat().st_size > 0 for f in figures), figures
