"""Checkpoints: written whole or not at all (a save killed mid-write leaves the previous one
loadable), the last K kept, an unreadable newest one skipped; RNG states restored; loaders
resumed mid-epoch yield exactly the batches the undisturbed epoch would have, and an epoch
re-dealt over another world size uses every unconsumed seed once."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import seastar as ss
from seastar.distributed.checkpoint import Checkpointer, rng_state, set_rng_state
from seastar.distributed.minibatch import DistributedNeighborLoader, SeedShards, redeal

ROOT = Path(__file__).resolve().parents[2]


def test_save_load_and_keep_last_k(tmp_path):
    ck = Checkpointer(tmp_path, every=2, keep=2)
    assert ck.latest() is None
    assert [ck.due(s) for s in range(5)] == [False, False, True, False, True]
    for step in (2, 4, 6):
        ck.save(step, {"w": torch.full((3,), float(step), dtype=torch.float64)})
    assert ck.steps() == [4, 6]
    got = ck.latest()
    assert got["step"] == 6 and torch.equal(got["w"], torch.full((3,), 6.0, dtype=torch.float64))
    assert not list(tmp_path.glob(".*tmp*"))


def test_unreadable_newest_falls_back(tmp_path, caplog):
    ck = Checkpointer(tmp_path, every=1, keep=5)
    ck.save(1, {"v": 1})
    ck.path(2).write_bytes(b"not a checkpoint")  # e.g. copied in by hand, truncated
    assert ck.latest()["v"] == 1
    assert "cannot be read" in caplog.text


@pytest.mark.parametrize("kw,match", [({"every": 0}, "every"), ({"every": 1, "keep": 0}, "keep")])
def test_bad_arguments(tmp_path, kw, match):
    with pytest.raises(ValueError, match=match):
        Checkpointer(tmp_path, **kw)
    with pytest.raises(ValueError, match="step"):
        Checkpointer(tmp_path, every=1).save(-1, {})


_KILLED_SAVE = textwrap.dedent("""
    import sys, time, torch
    from seastar.distributed import checkpoint
    ck = checkpoint.Checkpointer(sys.argv[1], every=1, keep=3)
    ck.save(1, {"w": torch.arange(10, dtype=torch.float64)})
    real_save = torch.save
    def slow_save(obj, f):  # half of the bytes, then the process is killed
        import io
        buf = io.BytesIO(); real_save(obj, buf)
        data = buf.getvalue(); f.write(data[: len(data) // 2]); f.flush()
        print("writing", flush=True); time.sleep(60)
    torch.save = slow_save
    ck.save(2, {"w": torch.zeros(10 ** 6, dtype=torch.float64)})
""")


def test_save_killed_mid_write_leaves_the_previous_loadable(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    try:
        assert p.stdout.readline().strip() == "writing"
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait(30)
    assert list(tmp_path.glob(".ckpt-000000002.pt.tmp*"))  # the partial file exists, under a name no load reads
    ck = Checkpointer(tmp_path, every=1, keep=3)
    got = ck.latest()
    assert got["step"] == 1 and torch.equal(got["w"], torch.arange(10, dtype=torch.float64))
    ck.save(3, {"w": 3})  # the next save clears the stray
    assert not list(tmp_path.glob(".*tmp*")) and ck.steps() == [1, 3]


def test_save_killed_at_random_instants(tmp_path):
    """A real save loop killed at arbitrary moments: whatever is on disk loads, newest first."""
    script = textwrap.dedent("""
        import sys, torch
        from seastar.distributed import checkpoint
        ck = checkpoint.Checkpointer(sys.argv[1], every=1, keep=2)
        step = (ck.latest() or {"step": 0})["step"]
        print("ready", flush=True)
        while True:
            step += 1
            ck.save(step, {"w": torch.full((300_000,), float(step), dtype=torch.float64)})
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    for delay in (0.05, 0.13, 0.31):
        p = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             env=env)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(delay)
        p.kill()
        p.wait(30)
        ck = Checkpointer(tmp_path, every=1, keep=2)
        for step in ck.steps():  # every file under a checkpoint's name is whole, not just the newest
            assert torch.load(ck.path(step), weights_only=False)["step"] == step
        got = ck.latest()
        if got is not None:
            assert torch.equal(got["w"], torch.full((300_000,), float(got["step"]), dtype=torch.float64))


def test_rng_state_round_trip():
    torch.manual_seed(3), random.seed(3), np.random.seed(3)
    state = rng_state()
    first = (torch.rand(4), random.random(), np.random.rand())
    torch.rand(7), random.random(), np.random.rand()
    set_rng_state(state)
    again = (torch.rand(4), random.random(), np.random.rand())
    assert torch.equal(first[0], again[0]) and first[1:] == again[1:]


def _graph():
    ei = torch.randint(0, 60, (2, 400), generator=torch.Generator().manual_seed(1))
    return ss.Graph.from_edge_index(ei, num_nodes=60), torch.randn(60, 3, dtype=torch.float64), torch.arange(60) % 3


@pytest.mark.parametrize("prefetch", [0, 2])
def test_loader_resumes_mid_epoch_with_the_same_batches(prefetch):
    graph, x, y = _graph()
    make = lambda: DistributedNeighborLoader((graph, x, y), [4, 3], batch_size=5, rank=1, world_size=2,  # noqa: E731
                                             prefetch=prefetch, seed=7)
    whole = make()
    whole.set_epoch(2)
    full = list(whole)
    resumed = make()
    resumed.resume(2, 3, saved_world=2, consumed=torch.empty(0, dtype=torch.long))
    tail = list(resumed)
    assert len(tail) == len(full) - 3
    for a, b in zip(full[3:], tail):
        assert torch.equal(a.seed_nodes, b.seed_nodes) and torch.equal(a.input_nodes, b.input_nodes)
        assert torch.equal(a.x, b.x)
        assert all(torch.equal(p.edge_index, q.edge_index) for p, q in zip(a.blocks, b.blocks))
    assert resumed.epoch == 3 and resumed.start == 0  # the next epoch starts at its first batch
    with pytest.raises(ValueError, match="start"):
        resumed.set_epoch(1, start=-1)


@pytest.mark.parametrize("old,new,done", [(3, 2, 2), (2, 3, 1), (3, 1, 0), (2, 2, 4)])
def test_redeal_uses_every_unconsumed_seed_once(old, new, done):
    seeds = torch.randperm(200)[:47]
    shards = [SeedShards(seeds, r, old, 4, seed=9) for r in range(old)]
    consumed = torch.cat([b for s in shards for b in s.batches(5)[:done]] + [torch.empty(0, dtype=torch.long)])
    order = shards[0].order(5)
    parts = [redeal(order, consumed, r, new, 4) for r in range(new)]
    assert len({len(p) for p in parts}) == 1  # the same number of steps on every new rank
    used = torch.cat([b for p in parts for b in p])
    assert torch.equal(torch.sort(torch.cat([used, consumed])).values, torch.sort(seeds).values)
    assert all(b.numel() <= 4 for p in parts for b in p)
