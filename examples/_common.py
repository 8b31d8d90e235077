"""What the heterogeneous example scripts share: checks of their command-line numbers, and the
start of a run (logging, the fallback log, threads, seeds) and the JSON result at its end."""
from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path
from typing import Dict, Iterable, Optional

import torch


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, at_least: Dict[str, int],
                    fractions: Iterable[str] = ("dropout",)) -> argparse.Namespace:
    """``parser.error`` (exit status 2, the option named) for a number out of range: each
    ``at_least`` option (when given) below its minimum, each ``fractions`` option outside [0, 1)."""
    for name, low in at_least.items():
        value = getattr(args, name)
        if value is not None and value < low:
            parser.error(f"--{name.replace('_', '-')} must be at least {low}, got {value}")
    for name in fractions:
        value = getattr(args, name)
        if not 0.0 <= value < 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in [0, 1), got {value}")
    return args


def check_device(parser: argparse.ArgumentParser, name: str) -> None:
    """``parser.error`` for a device torch does not know, that this machine does not have, or
    that this build of Seastar cannot run kernels on (CUDA without the CUDA backend)."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        parser.error(f"--device must be cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cpu":
        return
    if device.type != "cuda":
        parser.error(f"--device must be cpu, cuda or cuda:N, got {name!r}")
    if not torch.cuda.is_available():
        parser.error(f"--device {name}: no CUDA device is available here (torch {torch.__version__}: "
                     f"torch.cuda.is_available() is False)")
    if device.index is not None and device.index >= torch.cuda.device_count():
        parser.error(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    from seastar import _C
    if not getattr(_C, "cuda_built", False):
        parser.error(f"--device {name}: this build of Seastar has no CUDA backend (it was built without the CUDA "
                     f"toolkit); rebuild with the toolkit installed, or use --device cpu")


def start_run(args: argparse.Namespace, fallback_log: logging.Handler) -> None:
    """INFO logging; ``fallback_log`` collects seastar's messages (at least at INFO, so a program
    that falls back to the reference backend is recorded); ``--threads`` and ``--seed`` applied."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    seastar_log = logging.getLogger("seastar")
    seastar_log.addHandler(fallback_log)
    if seastar_log.getEffectiveLevel() > logging.INFO:
        seastar_log.setLevel(logging.INFO)
    if args.threads:
        torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)


def write_json(path: Optional[str], result: dict) -> None:
    """``result`` as indented JSON at ``path`` (its folder created); nothing when ``path`` is None."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
