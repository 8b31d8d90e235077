"""Sphinx configuration of Seastar's documentation site (``bash scripts/docs.sh`` builds it).

Pages are Markdown (MyST). Two pages are generated at each build so that they cannot drift from
what they describe: the vertex-program language's op table (from ``core/ir/ops.def``, through the
extension's ``_C.op_table()``, and the gradient rules of ``core/passes/autodiff.cpp``) and the
benchmark figures (drawn with matplotlib from the committed results under
``benchmarks/results/``). Both are written into ``docs/_generated/`` (not committed).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(DOCS / "_ext"))

project = "Seastar"
author = "The Seastar developers"
copyright = "the Seastar developers"  # noqa: A001 (Sphinx's name)

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
    "seastar_generated",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "README.md", "requirements.txt"]
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]  # $...$ and $$...$$: the tutorial's formulas
myst_heading_anchors = 3

html_theme = "furo"
html_title = "Seastar"
html_static_path = []

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

nitpicky = True
# names the API's signatures mention that no page of this site documents: torch's and the
# standard library's own types
nitpick_ignore_regex = [
    (r"py:class", r"(torch|typing|collections|numpy|pathlib|os|enum|abc|builtins)\..*"),
    (r"py:class", r"(Tensor|Module|Path|Callable|Iterable|Iterator|Sequence|Mapping|Any|Optional|Union)"),
    (r"py:.*", r"(seastar\.)?_C\..*"),
    (r"py:class", r"(nn|logging|F)\..*"),
    (r"py:class", r"'.*'"),  # a forward reference written as a string under `from __future__ import annotations`
]
os.environ.setdefault("SEASTAR_LOG_LEVEL", "warn")
