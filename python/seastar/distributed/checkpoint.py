"""Training checkpoints that a crash cannot corrupt: the newest whole one is always loadable.

    ckpt = Checkpointer("/shared/run1/ckpt", every=10, keep=3)
    state = ckpt.latest()                      # None on a fresh start
    ...
    if ckpt.due(step):
        ckpt.save(step, {"model": ..., "optimizer": ..., "epoch": e, "batch": b, ...})

A save writes a temporary file in the same folder, flushes it, ``fsync``s it, renames it over
the final name (``os.replace``: atomic on POSIX) and ``fsync``s the folder, so after a crash at
any instant the folder holds the previous checkpoints whole and at most one stray temporary
file, which no load reads and the next save removes. Only the last ``keep`` are kept.

``latest()`` reads the newest checkpoint; if it cannot be read (a disk that lied about
``fsync``, a file copied in by hand) it says so and falls back to the one before.

``rng_state()`` / ``set_rng_state()`` capture and restore the generators a training step may
draw from (torch's CPU and CUDA generators, Python's ``random``, NumPy's global one).
"""
from __future__ import annotations

import logging
import os
import random
import re
from pathlib import Path
from typing import Optional

import numpy as np
import torch

log = logging.getLogger("seastar.distributed")

_NAME = re.compile(r"^ckpt-(\d{9})\.pt$")


class Checkpointer:
    """Checkpoints of one run in ``directory`` (created if missing): one file per saved step,
    ``ckpt-<step>.pt``. ``every``: steps between saves (``due``); ``keep``: how many to keep."""

    def __init__(self, directory, every: int, keep: int = 3):
        if int(every) < 1:
            raise ValueError(f"checkpoint interval 'every' must be at least 1 step, got {every}")
        if int(keep) < 1:
            raise ValueError(f"'keep' must keep at least 1 checkpoint, got {keep}")
        self.directory = Path(directory)
        self.every, self.keep = int(every), int(keep)
        self.directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK):
            raise PermissionError(f"checkpoint directory {self.directory} is not writable")

    def path(self, step: int) -> Path:
        return self.directory / f"ckpt-{int(step):09d}.pt"

    def steps(self) -> list:
        """The steps of the checkpoints on disk, oldest first (temporary files excluded)."""
        found = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m:
                found.append(int(m.group(1)))
        return sorted(found)

    def due(self, step: int) -> bool:
        return int(step) > 0 and int(step) % self.every == 0

    def save(self, step: int, state: dict) -> Path:
        """Writes ``state`` (anything ``torch.save`` takes) as the checkpoint of ``step``."""
        if int(step) < 0:
            raise ValueError(f"a checkpoint's step must be >= 0, got {step}")
        final = self.path(step)
        for stray in self.directory.glob(".ckpt-*.tmp*"):  # left by a save that was killed
            stray.unlink(missing_ok=True)
        tmp = self.directory / f".{final.name}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            torch.save(dict(state, step=int(step)), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.directory)  # the rename itself survives a power loss
        for old in self.steps()[:-self.keep]:
            self.path(old).unlink(missing_ok=True)
        log.info("checkpoint of step %d written to %s", step, final)
        return final

    def latest(self) -> Optional[dict]:
        """The newest readable checkpoint (a dict with ``step``), or None when there is none."""
        for step in reversed(self.steps()):
            p = self.path(step)
            try:
                return torch.load(p, map_location="cpu", weights_only=False)
            except Exception as exc:  # noqa: BLE001 - any unreadable file: try the one before
                log.warning("checkpoint %s cannot be read (%s: %s); trying the one before", p, type(exc).__name__, exc)
        return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rng_state() -> dict:
    """Every generator a step may draw from, to restore with ``set_rng_state``."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def restart_count() -> int:
    """How many times torchrun's agent has restarted this job's workers (0 on the first try)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def load_agreed(ckpt: Optional[Checkpointer], group=None) -> Optional[dict]:
    """``ckpt.latest()`` on every rank, checked to be the same step everywhere (a collective):
    ranks that resumed from different checkpoints would train different models."""
    import torch.distributed as dist

    state = ckpt.latest() if ckpt is not None else None
    step = torch.tensor([state["step"] if state is not None else -1], dtype=torch.long)
    if dist.is_initialized():
        lo, hi = step.clone(), step.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN, group=group)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX, group=group)
        if int(lo) != int(hi):
            raise RuntimeError(f"the ranks found different latest checkpoints (steps {int(lo)} to {int(hi)}): is "
                               f"the checkpoint directory one folder that every rank sees?")
    return state


def gather_objects(obj, group=None) -> list:
    """Every rank's ``obj`` (for the per-rank parts of a checkpoint: RNG states, positions)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return [obj]
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out
