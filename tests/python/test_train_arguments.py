"""examples/train.py turns bad command-line arguments into one argparse error line (exit 2)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def train():
    sys.path.insert(0, str(EXAMPLES))  # train.py imports _common from its folder
    try:
        spec = importlib.util.spec_from_file_location("seastar_example_train", EXAMPLES / "train.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(EXAMPLES))


@pytest.mark.parametrize("argv, message", [
    (["--epochs", "0"], "--epochs must be at least 1, got 0"),
    (["--hidden", "0"], "--hidden must be at least 1, got 0"),
    (["--lr", "-1"], "--lr must be positive, got -1.0"),
    (["--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
    (["--device", "tpu"], "--device must be cpu, cuda or cuda:N, got 'tpu'"),
])
def test_bad_argument_is_one_error_line(train, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f": error: {message}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is available")
def test_cuda_without_a_device_is_one_error_line(train, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--device", "cuda"])
    assert "--device cuda: no CUDA device is available here" in capsys.readouterr().err.splitlines()[-1]


def test_good_arguments_fill_the_recipe(train):
    args = train.parse_args(["--model", "gat", "--device", "cpu"])
    assert (args.epochs, args.heads, args.lr) == (200, 8, 0.005)
