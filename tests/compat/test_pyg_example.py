"""examples/pyg_swap.py: a PyG model on seastar.nn (--check compares with PyG's layers)."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

REPO = Path(__file__).resolve().parents[2]


def test_pyg_swap_example():
    cmd = [sys.executable, str(REPO / "examples" / "pyg_swap.py"), "--check", "--epochs", "2", "--threads", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "largest difference to PyG" in proc.stdout
    assert proc.stdout.count("\nepoch ") == 2 and "test accuracy" in proc.stdout
