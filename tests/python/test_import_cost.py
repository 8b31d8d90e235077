"""``import seastar`` and an eager training step load no more of torch than they use: not Dynamo,
not sympy (torch.compile loads them when it is used). Every process that imports Seastar pays
for what it loads, the test command's many subprocesses included."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from seastar._dynamo_marks import assume_constant_result

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch._dynamo", "sympy", "torch.fx.experimental.symbolic_shapes", "torch._inductor")


def _loaded_after(code: str):
    probe = code + f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_import_loads_no_dynamo_or_sympy():
    assert _loaded_after("import seastar") == "[]"


def test_an_eager_training_step_loads_no_dynamo_or_sympy():
    step = """
import torch, seastar as ss
from seastar.nn import GATConv, GCNConv, SAGEConv
ei = torch.tensor([[0, 1, 2, 2, 3], [1, 2, 0, 3, 3]])
g = ss.Graph.from_edge_index(ei, num_nodes=5)
x = torch.randn(5, 4, requires_grad=True)
for layer in (GCNConv(4, 3), GATConv(4, 3, heads=2), SAGEConv(4, 3)):
    layer(g, x).sum().backward()
"""
    assert _loaded_after(step) == "[]"


def test_the_constant_result_mark_is_the_one_dynamo_sets():
    def ours():
        return 1

    def dynamos():
        return 1

    assume_constant_result(ours)
    torch._dynamo.assume_constant_result(dynamos)
    marks = lambda f: {k: v for k, v in vars(f).items()}  # noqa: E731
    assert marks(ours) == marks(dynamos) and marks(ours)
