"""Fixtures of the GPU suite: the tricky graphs of tests/python/conftest.py (loaded under another
module name, so both conftests can coexist) and the model table of tests/python/models.py."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_PY_TESTS = _HERE.parent / "python"
if str(_PY_TESTS) not in sys.path:
    sys.path.insert(0, str(_PY_TESTS))  # models.py
_spec = importlib.util.spec_from_file_location("seastar_cpu_conftest", _PY_TESTS / "conftest.py")
_graphs = importlib.util.module_from_spec(_spec)
sys.modules["seastar_cpu_conftest"] = _graphs
_spec.loader.exec_module(_graphs)  # also puts <repo>/python on sys.path when seastar is not installed

tricky_graph = _graphs.tricky_graph
typed_graph = _graphs.typed_graph
small_graph = _graphs.small_graph
graph_factory = _graphs.graph_factory
build_graph = _graphs.build_graph
