"""Partition-parallel full-graph training on 2 and 3 real processes (gloo, localhost) equals
single-process training in float64: the losses of 5 epochs and the final parameters, for GCN
and GAT on Cora and on a graph with isolated vertices, self loops, multi-edges and a hub, and
for R-GCN on a typed graph. The halo exchange sends exactly the boundary rows."""
from __future__ import annotations

import importlib.util

import pytest
import torch

import seastar as ss
from seastar.distributed import launch, load_partition, partition_graph

import distributed_workers as workers
from test_distributed_partition import messy_dataset

TOL = 1e-9
METHOD = "metis" if importlib.util.find_spec("pymetis") else "random"


def _datasets():
    cora = ss.datasets.load("cora", dtype=torch.float64)
    cora.x = cora.x.to_dense() if cora.x.is_sparse else cora.x
    messy, _, _ = messy_dataset(n=120, seed=3, typed=False)
    messy.num_classes = 4
    typed = ss.datasets.planted_typed_classification(300, 1800, 1, 3, 3, 8, seed=0, dtype=torch.float64)
    return {"cora": (cora, METHOD, 0), "messy": (messy, "random", 0), "typed": (typed, METHOD, 3)}


# (dataset, model, world sizes)
CASES = [("cora", "gcn", (2, 3)), ("cora", "gat", (2, 3)), ("messy", "gcn", (3,)), ("messy", "gat", (3,)),
         ("typed", "rgcn", (2,))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every case of a world size in one process group: {(dataset, model, world): rank results}."""
    data = _datasets()
    root = tmp_path_factory.mktemp("fullgraph")
    results = {}
    for world in (2, 3):
        cases, keys = [], []
        for name in sorted({c[0] for c in CASES if world in c[2]}):
            ds, method, _ = data[name]
            partition_graph(ds, world, root / f"{name}-{world}", method=method)
        for name, model, worlds in CASES:
            if world not in worlds:
                continue
            ds, _, rels = data[name]
            out = root / f"{name}-{model}-{world}"
            out.mkdir()
            cases.append((str(root / f"{name}-{world}"), model, ds.num_classes, rels, str(out)))
            keys.append(((name, model, world), out))
        launch.spawn(workers.fullgraph_cases, world, (cases,), timeout_s=300)
        for key, out in keys:
            results[key] = [torch.load(out / f"rank{r}.pt") for r in range(world)]
    return data, root, results


@pytest.mark.parametrize("name,model,world", [(d, m, w) for d, m, ws in CASES for w in ws])
def test_matches_single_process(runs, name, model, world):
    data, root, results = runs
    ds, _, rels = data[name]
    ranks = results[(name, model, world)]
    want_losses, want_state = workers.train_single(ds.graph, ds.x.double(), ds.y, ds.train_mask, model,
                                                   ds.num_classes, rels)
    for r in ranks:
        diff = max(abs(a - b) for a, b in zip(r["losses"], want_losses))
        assert diff < TOL, (r["losses"], want_losses)
        for k, v in want_state.items():
            assert (r["state"][k] - v).abs().max().item() < TOL, k
        for a, b in zip(r["params_per_step"], ranks[0]["params_per_step"]):  # replicated after every step
            assert torch.equal(a, b)
    assert want_losses[-1] < want_losses[0]  # it trained
    worst_param = max((r["state"][k] - v).abs().max().item() for r in ranks for k, v in want_state.items())
    print(f"{name} {model} on {world} processes: largest loss difference "
          f"{max(max(abs(a - b) for a, b in zip(r['losses'], want_losses)) for r in ranks):.2e}, "
          f"largest parameter difference {worst_param:.2e}")


@pytest.mark.parametrize("model,width", [("gcn", 16), ("gat", 32)])
def test_halo_bytes_are_the_boundary_rows(runs, model, width):
    """Per epoch, the hidden layer's boundary rows once forward and once backward; besides,
    layer 1's input rows once (constant) and GCN's degrees once."""
    data, root, results = runs
    cora = data["cora"][0]
    for world in (2, 3):
        ranks = results[("cora", model, world)]
        halo = sum(load_partition(root / f"cora-{world}", r).num_halo for r in range(world))
        sent = sum(r["stats"]["bytes_sent"] for r in ranks)
        once = halo * cora.x.shape[1] * 8 + (halo * 8 if model == "gcn" else 0)
        assert sent == once + workers.EPOCHS * halo * width * 8 * 2


def test_a_failing_rank_stops_the_others():
    with pytest.raises(RuntimeError, match="rank 1 exited with code 3"):
        launch.spawn(workers.fail_on_rank_one, 2, (), timeout_s=60, collective_timeout_s=20)
