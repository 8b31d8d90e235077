"""examples/train_minibatch.py: the typed models train on sampled typed blocks, and bad argument
combinations are one argparse error line."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_minibatch.py"


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLE.parent))  # the example imports _common from its folder
    try:
        spec = importlib.util.spec_from_file_location("seastar_example_train_minibatch", EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(EXAMPLE.parent))


@pytest.mark.parametrize("model", ["hgt", "rgcn"])
def test_typed_models_learn_on_sampled_blocks(example, model, tmp_path):
    """A few epochs on a small planted graph (8 classes, chance 0.125) from the command line."""
    out = tmp_path / "result.json"
    result = example.main(["--model", model, "--dataset", "planted", "--num-nodes", "3000", "--fanouts", "10,10",
                           "--hidden", "16", "--heads", "2", "--batch-size", "100", "--epochs", "8", "--lr", "0.01",
                           "--num-classes", "8", "--no-progress", "--json", str(out)])
    assert out.exists()
    assert len(result["history"]) == 8
    assert result["best"]["test"] > 0.25, result["best"]  # twice chance


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_the_first_layer_reading_x_in_place_learns(example, model):
    """--x-in-place: SAGE reads the feature table in place, GAT gathers inside the layer."""
    result = example.main(["--model", model, "--dataset", "synthetic", "--num-nodes", "3000", "--fanouts", "10,5",
                           "--hidden", "16", "--heads", "2", "--batch-size", "200", "--epochs", "3", "--x-in-place",
                           "--no-progress"])
    assert result["args"]["x_in_place"]
    assert result["best"]["test"] > 0.6, result["best"]  # 10 classes: chance 0.1


@pytest.mark.parametrize("argv, message", [
    (["--model", "hgt", "--dataset", "cora"], "--model rgcn and hgt train on a typed graph"),
    (["--model", "sage", "--dataset", "planted"], "--model rgcn and hgt train on a typed graph"),
    (["--model", "hgt", "--dataset", "planted", "--hidden", "30", "--heads", "4"],
     "--hidden (30) must be divisible by --heads (4) for HGT"),
    (["--model", "rgcn", "--dataset", "planted", "--x-in-place"], "--x-in-place needs a graph without node types"),
    (["--device", "tpu"], "--device must be cpu, cuda or cuda:N, got 'tpu'"),
    (["--device", "cuda:x"], "--device must be cpu, cuda or cuda:N, got 'cuda:x'"),
])
def test_bad_argument_combinations(example, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        example.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_without_a_gpu_is_one_error_line(example, capsys, device):
    with pytest.raises(SystemExit) as exit_info:
        example.parse_args(["--device", device])
    assert exit_info.value.code == 2
    assert f"--device {device}: no CUDA device is available here" in capsys.readouterr().err.strip().splitlines()[-1]


def test_device_cpu_trains_through_the_transfer_path(example):
    """--device cpu: the loader's device path (no stream, no copy) and the device-side loss sums."""
    result = example.main(["--model", "sage", "--dataset", "synthetic", "--num-nodes", "2000", "--fanouts", "5,5",
                           "--hidden", "16", "--batch-size", "200", "--epochs", "2", "--device", "cpu",
                           "--features", "device", "--no-progress"])
    assert result["args"]["device"] == "cpu"
    assert result["best"]["test"] > 0.5, result["best"]


@pytest.mark.parametrize("subgraph", [False, True])
def test_gcn_learns_on_blocks_and_on_subgraphs(example, subgraph):
    """--model gcn: GCNConv on sampled blocks, or on square subgraphs (one more hop than layers)."""
    extra = ["--fanouts=-1,-1,-1", "--layers", "2", "--subgraph"] if subgraph else ["--fanouts", "10,10"]
    result = example.main(["--model", "gcn", "--dataset", "cora", "--hidden", "16", "--batch-size", "70",
                           "--epochs", "10", "--lr", "0.01", "--no-progress"] + extra)
    assert result["args"]["subgraph"] == subgraph
    assert result["best"]["test"] > 0.6, result["best"]  # 7 classes


def test_layers_must_match_the_fanouts_on_blocks(example, capsys):
    with pytest.raises(SystemExit):
        example.parse_args(["--model", "gcn", "--fanouts", "5,5", "--layers", "3"])
    assert "--layers (3) must equal the number of fanouts (2)" in capsys.readouterr().err
    assert example.parse_args(["--model", "gcn", "--fanouts", "5,5,5", "--layers", "2", "--subgraph"]).layers == 2
