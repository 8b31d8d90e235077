"""examples/distributed/train.py under torchrun with 2 processes: full-graph mode trains and
prints the final accuracy from rank 0, log lines carry the rank, mini-batches over partitioned
features train, and a rank that dies makes the other exit with a clear message instead of
hanging; --mode auto plans (calibrating on both ranks) and trains in the chosen mode; R-GCN
trains on a typed graph in both modes."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "distributed" / "train.py"
# the example partitions with METIS by default; without pymetis (tests/distributed-requirements.txt
# not installed: no network) the full-graph run uses the random partitioner instead
PARTITIONER = "metis" if importlib.util.find_spec("pymetis") else "random"


def _torchrun(args, timeout=240):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(SCRIPT)] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _direct(args, timeout=180):
    """The two ranks as plain processes with torchrun's environment, but no torchrun agent:
    the agent would SIGTERM the survivor as soon as one rank fails, before the survivor's own
    detection (the thing under test) can run."""
    from seastar.distributed.launch import free_port
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT)] + args, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


def test_fullgraph_gat_on_cora(tmp_path):
    r = _torchrun(["--mode", "fullgraph", "--dataset", "cora", "--model", "gat", "--epochs", "3",
                   "--method", PARTITIONER, "--partition-dir", str(tmp_path / "parts"), "--json", str(tmp_path / "r.json")])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "final: test accuracy" in r.stdout and r.stdout.count("epoch ") >= 3
    assert "[rank 0/2]" in out and "[rank 1/2]" in out
    assert (tmp_path / "parts" / "part-1" / "graph.pt").is_file() and (tmp_path / "r.json").is_file()


def test_minibatch_gcn_on_cora(tmp_path):
    """GCN in the data-parallel mini-batch mode: GCNConv on each rank's sampled blocks."""
    r = _torchrun(["--mode", "minibatch", "--dataset", "cora", "--model", "gcn", "--epochs", "3", "--batch-size", "35",
                   "--shared-file", str(tmp_path / "cora.pt"), "--json", str(tmp_path / "r.json")])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "final: test accuracy" in r.stdout and r.stdout.count("epoch ") >= 3


TYPED = ["--dataset", "typed", "--model", "rgcn", "--num-nodes", "2000", "--avg-degree", "12", "--num-features", "16",
         "--num-relations", "6", "--num-classes", "6", "--train-fraction", "0.5", "--lr", "0.02", "--dropout", "0"]


@pytest.mark.parametrize("mode", [["--mode", "fullgraph", "--epochs", "40"],
                                  ["--mode", "minibatch", "--features", "partitioned", "--cache-fraction", "0.1",
                                   "--epochs", "8", "--batch-size", "100"]], ids=["fullgraph", "minibatch_partitioned"])
def test_rgcn_on_a_typed_graph(tmp_path, mode):
    """R-GCN trains on a graph whose classes are written in the relation types of the in-edges,
    in both modes: the edge types travel with the partition, the shared file and the sampled
    blocks. A model blind to the types stays near chance (1 in 6)."""
    import json

    r = _torchrun(mode + TYPED + ["--method", "random", "--partition-dir", str(tmp_path / "parts-{parts}"),
                                  "--shared-file", str(tmp_path / "typed.pt"), "--json", str(tmp_path / "r.json")])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    result = json.loads((tmp_path / "r.json").read_text())
    test_acc = result["final"]["test"] if "final" in result and result["final"] else result["history"][-1]["test"]
    assert test_acc > 0.9, out[-3000:]


def test_a_partition_of_other_data_is_refused(tmp_path):
    """A partition folder made for other data (here a smaller synthetic graph) is refused by
    name, not read with mismatched sizes."""
    common = ["--mode", "fullgraph", "--model", "gcn", "--epochs", "1", "--dataset", "synthetic", "--method", "random",
              "--num-features", "8", "--partition-dir", str(tmp_path / "parts")]
    r = _torchrun(common + ["--num-nodes", "500"])
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    r = _torchrun(common + ["--num-nodes", "600"])
    assert r.returncode != 0 and "was made of synthetic-500" in r.stderr and "another --partition-dir" in r.stderr, \
        (r.stdout + r.stderr)[-4000:]


def test_a_dead_rank_stops_the_other(tmp_path):
    """Mini-batches over partitioned features train two epochs; then rank 1 dies and rank 0
    exits with the message instead of waiting (well before the collective timeout)."""
    (rc0, out0, err0), (rc1, _, err1) = _direct(
        ["--mode", "minibatch", "--features", "partitioned", "--dataset", "cora", "--model", "sage",
         "--epochs", "5", "--batch-size", "35", "--method", PARTITIONER, "--partition-dir", str(tmp_path / "parts"),
         "--shared-file", str(tmp_path / "cora.pt"), "--exit-at-epoch", "3", "--exit-rank", "1",
         "--timeout", "60"])
    assert rc1 == 3, err1[-4000:]
    assert "exiting at epoch 3 on request" in err1
    assert rc0 == 1, (out0 + err0)[-4000:]
    assert "epoch   2  loss" in out0, (out0 + err0)[-4000:]
    assert "another rank has probably died" in err0, err0[-4000:]
    assert "final: test accuracy" not in out0


def test_mode_auto_plans_and_trains(tmp_path):
    """--mode auto: every rank calibrates, rank 0 prints the plan's table, and the job trains in
    the chosen mode; the plan, with its measured calibration, is in the result."""
    import json

    r = _torchrun(["--mode", "auto", "--dataset", "cora", "--model", "sage", "--epochs", "2", "--batch-size", "35",
                   "--method", PARTITIONER, "--partition-dir", str(tmp_path / "parts-{parts}"),
                   "--shared-file", str(tmp_path / "cora.pt"), "--json", str(tmp_path / "r.json")])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "**chosen**" in r.stdout and "--mode auto chose" in out and "final: test accuracy" in r.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    plan = result["plan"]
    assert plan["world_size"] == 2 and len(plan["rows"]) == 3
    assert plan["calibration"]["backend"] == "gloo" and plan["calibration"]["aggregation_rate"] > 0
    assert result["args"]["mode"] == plan["choice"]["mode"]


def test_bad_arguments():
    spec = importlib.util.spec_from_file_location("seastar_example_distributed_train", SCRIPT)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.parse_args(["--mode", "minibatch", "--model", "gcn"]).model == "gcn"  # GCNConv takes blocks
    with pytest.raises(SystemExit):
        example.parse_args(["--mode", "fullgraph", "--epochs", "0"])
    with pytest.raises(SystemExit):  # a feature cache needs partitioned features
        example.parse_args(["--mode", "minibatch", "--cache-fraction", "0.1"])
    with pytest.raises(SystemExit):
        example.parse_args(["--mode", "minibatch", "--checkpoint-every", "0"])
    with pytest.raises(SystemExit):  # R-GCN needs edge types
        example.parse_args(["--mode", "minibatch", "--model", "rgcn", "--dataset", "cora"])
    with pytest.raises(SystemExit):  # each class is a pair of relations: 10 classes need 4 of them
        example.parse_args(["--mode", "minibatch", "--dataset", "typed", "--num-relations", "3"])
