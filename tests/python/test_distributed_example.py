"""examples/distributed/train.py under torchrun with 2 processes: full-graph mode trains and
prints the final accuracy from rank 0, log lines carry the rank, mini-batches over partitioned
features train, and a rank that dies makes the other exit with a clear message instead of
hanging."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "distributed" / "train.py"


def _torchrun(args, timeout=240):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(SCRIPT)] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_fullgraph_gat_on_cora(tmp_path):
    r = _torchrun(["--mode", "fullgraph", "--dataset", "cora", "--model", "gat", "--epochs", "3",
                   "--partition-dir", str(tmp_path / "parts"), "--json", str(tmp_path / "r.json")])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "final: test accuracy" in r.stdout and r.stdout.count("epoch ") >= 3
    assert "[rank 0/2]" in out and "[rank 1/2]" in out
    assert (tmp_path / "parts" / "part-1" / "graph.pt").is_file() and (tmp_path / "r.json").is_file()


def test_a_dead_rank_stops_the_other(tmp_path):
    """Mini-batches over partitioned features train two epochs; then rank 1 dies and rank 0
    exits with the message instead of waiting."""
    r = _torchrun(["--mode", "minibatch", "--features", "partitioned", "--dataset", "cora", "--model", "sage",
                   "--epochs", "5", "--batch-size", "35", "--partition-dir", str(tmp_path / "parts"),
                   "--shared-file", str(tmp_path / "cora.pt"), "--exit-at-epoch", "3", "--exit-rank", "1",
                   "--timeout", "30"], timeout=180)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "epoch   2  loss" in r.stdout, out[-4000:]
    assert "another rank has probably died" in out, out[-4000:]


def test_bad_arguments():
    spec = importlib.util.spec_from_file_location("seastar_example_distributed_train", SCRIPT)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with pytest.raises(SystemExit):
        example.parse_args(["--mode", "minibatch", "--model", "gcn"])
    with pytest.raises(SystemExit):
        example.parse_args(["--mode", "fullgraph", "--epochs", "0"])
