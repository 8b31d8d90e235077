"""The peers of ``bench_minibatch.py``: DGL's NeighborSampler + DataLoader and PyG's
NeighborLoader, with their SAGEConv / GATConv, on the dataset the parent exported.

Run as ``python _minibatch_peers.py --child CFG_JSON`` by the parent (``_spawn.spawn_json``):
DGL's under the DGL environment's interpreter (``_peer_env.py``), PyG's under the suite's own
with the folder holding the torch-sparse build on ``PYTHONPATH``. Never imports seastar (the
DGL environment has another torch). Measures what the seastar child does: sampling (with the
gathering of the batch's features and labels) and compute separately (both inline, on the
calling thread: neither peer's default loader samples ahead without worker processes),
seeds per second, the peak RSS above the loaded dataset, and test accuracy after the same
number of batches.
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _proc_memory import hwm_mb, reset_peak  # noqa: E402


def load_dataset(folder: str):
    """The arrays ``bench_minibatch.py`` exported (numpy .npy: readable by either numpy)."""
    import numpy as np
    import torch
    arr = {k: torch.from_numpy(np.load(os.path.join(folder, f"{k}.npy")))
           for k in ("edge_index", "x", "y", "train_idx", "test_idx")}
    return arr


def _models_dgl(model: str, F: int, C: int):
    import dgl.nn as dglnn
    import torch
    if model == "sage":
        convs = torch.nn.ModuleList([dglnn.SAGEConv(F, 256, "mean"), dglnn.SAGEConv(256, C, "mean")])
    else:  # isolated destinations of a sampled block are allowed, as seastar's and PyG's self loops allow
        convs = torch.nn.ModuleList([dglnn.GATConv(F, 64, num_heads=4, allow_zero_in_degree=True),
                                     dglnn.GATConv(256, C, num_heads=1, allow_zero_in_degree=True)])
    return convs


def _models_pyg(model: str, F: int, C: int):
    import torch
    import torch_geometric.nn as gnn
    if model == "sage":
        return torch.nn.ModuleList([gnn.SAGEConv(F, 256, aggr="mean"), gnn.SAGEConv(256, C, aggr="mean")])
    return torch.nn.ModuleList([gnn.GATConv(F, 64, heads=4), gnn.GATConv(256, C, heads=1, concat=False)])


def run(cfg: dict) -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(0)
    impl = cfg["impl"]
    if impl == "dgl":
        import dgl
        import dgl.dataloading  # noqa: F401
    else:
        import torch_geometric
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader
    t0 = time.perf_counter()
    d = load_dataset(cfg["dataset_dir"])
    N, C, Fin = d["x"].shape[0], int(d["y"].max()) + 1, d["x"].shape[1]
    if impl == "dgl":
        g = dgl.graph((d["edge_index"][0], d["edge_index"][1]), num_nodes=N)
        g.create_formats_()
        convs = _models_dgl(cfg.get("model", "sage"), Fin, C)
        version = dict(dgl=dgl.__version__, torch=torch.__version__)
    else:
        data = Data(x=d["x"], y=d["y"], edge_index=d["edge_index"], num_nodes=N)
        convs = _models_pyg(cfg.get("model", "sage"), Fin, C)
        import importlib.util
        version = dict(torch_geometric=torch_geometric.__version__, torch=torch.__version__,
                       sampler_backend=[m for m in ("pyg_lib", "torch_sparse") if importlib.util.find_spec(m)])
    x, y = d["x"], d["y"]
    build_s = time.perf_counter() - t0
    act = F.relu if cfg.get("model", "sage") == "sage" else F.elu
    opt = torch.optim.Adam(convs.parameters(), lr=0.003)

    def loader(seeds, shuffle, seed):
        torch.manual_seed(seed)
        if impl == "dgl":
            # DGL lists fanouts from the input layer to the output layer; seastar and PyG from the
            # seeds outwards (num_neighbors[0] is the seeds' fanout): the same sampling reversed
            sampler = dgl.dataloading.NeighborSampler(list(reversed(cfg["fanouts"])))
            return dgl.dataloading.DataLoader(g, seeds, sampler, batch_size=cfg["batch_size"], shuffle=shuffle,
                                              drop_last=False, num_workers=0)
        return NeighborLoader(data, num_neighbors=cfg["fanouts"], batch_size=cfg["batch_size"], input_nodes=seeds,
                              shuffle=shuffle)

    def unpack(b):
        """(forward inputs, seed labels, batch size), gathering features as the sampler's part."""
        if impl == "dgl":
            input_nodes, output_nodes, blocks = b
            return (blocks, x[input_nodes]), y[output_nodes], len(output_nodes)
        return (b.edge_index, b.x), b.y[:b.batch_size], b.batch_size

    def forward(inp, bs):
        if impl == "dgl":
            blocks, h = inp
            h = act(convs[0](blocks[0], h).flatten(1))
            return convs[1](blocks[1], h).mean(1) if cfg["model"] == "gat" else convs[1](blocks[1], h)
        ei, h = inp
        h = act(convs[0](h, ei))
        return convs[1](h, ei)[:bs]

    def step(inp, yb, bs):
        opt.zero_grad()
        loss = F.cross_entropy(forward(inp, bs), yb)
        loss.backward()
        opt.step()

    def timed_batches(it, nb, fn):
        sample_s = compute_s = 0.0
        seeds = batches = 0
        while batches < nb:
            t = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            inp, yb, bs = unpack(b)
            t1 = time.perf_counter()
            fn(inp, yb, bs)
            t2 = time.perf_counter()
            sample_s, compute_s = sample_s + (t1 - t), compute_s + (t2 - t1)
            seeds, batches = seeds + bs, batches + 1
        return sample_s, compute_s, seeds, batches

    out = dict(cfg=cfg, build_s=build_s, edges=int(d["edge_index"].shape[1]), versions=version)
    reset_peak()
    base = hwm_mb()
    nb = cfg["max_batches"]
    if cfg["kind"] == "sample":
        t0 = time.perf_counter()
        sample_s, _, seeds, batches = timed_batches(iter(loader(d["train_idx"], True, 1)), nb, lambda *a: None)
        dt = time.perf_counter() - t0
        out.update(seconds=dt, seeds_per_s=seeds / dt, batches=batches, sample_s=sample_s)
    else:
        warm = next(iter(loader(d["train_idx"], True, 2)))
        step(*unpack(warm))  # lazy formats, allocator pools: outside the timed epoch
        del warm  # as the seastar side: no batch of the warm-up stays alive beside the epoch's
        convs.train()
        t0 = time.perf_counter()
        sample_s, compute_s, seeds, batches = timed_batches(iter(loader(d["train_idx"], True, 1)), nb, step)
        dt = time.perf_counter() - t0
        out.update(seconds=dt, seeds_per_s=seeds / dt, batches=batches, sample_s=sample_s, wait_s=sample_s,
                   compute_s=compute_s)
        out["test_accuracy"] = _accuracy(convs, loader, unpack, forward, d["test_idx"][:cfg["eval_seeds"]])
    out["peak_mb_above_dataset"] = hwm_mb() - base
    return out


def _accuracy(convs, loader, unpack, forward, seeds):
    import torch
    convs.eval()
    correct = total = 0
    with torch.no_grad():
        for b in loader(seeds, False, 3):
            inp, yb, bs = unpack(b)
            correct += int((forward(inp, bs).argmax(-1) == yb).sum())
            total += bs
    return correct / max(total, 1)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--child":
        raise SystemExit("usage: _minibatch_peers.py --child CONFIG_JSON (started by bench_minibatch.py)")
    print(json.dumps(run(json.loads(sys.argv[2]))), flush=True)
