"""The documentation site (docs/, scripts/docs.sh): it builds with no warning and nitpicky
references, its API reference lists every public name of each public module's ``__all__``, every
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
@pytest.mark.parametrize("page", ["index", "tutorial/write_a_layer"])
def test_pages_render_in_a_browser(site, page, tmp_path):
    """A headless Chromium screenshot of the page is not blank, and the page's own rendering
    shows furo's stylesheet applied (the sidebar is laid out beside the content)."""
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
