"""Mini-batch training under ``torch.compile``: one compiled model for every batch of a loader.

A graph enters compiled code as tensors whose shapes are its sizes (``seastar.graph_inputs``),
so the blocks of a ``NeighborLoader``, each of other sizes, run one compiled program. The loader
marks its batches' sizes as varying (``loader.sizes_vary``), so with ``dynamic=None`` (torch's
default) as with ``dynamic=True`` torch compiles once, with symbolic sizes (the issue allows
two: torch's static compile, then its dynamic one). Each step (two layers
and the loss) runs compiled with ``fullgraph=True`` (a graph break fails) and, in float64, equals
an eager copy of the model batch by batch: the loss and every parameter's gradient to 1e-10.

The loader's seed count divides the vertex count, so every batch has as many seeds (a last
batch of one seed would be a size torch specialises, and compile again).
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
import seastar.nn as snn
from seastar.loader import NeighborLoader

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)
N, E, F_IN, CLASSES, RELATIONS, NODE_TYPES = 240, 1600, 6, 3, 3, 2
BATCH = 12  # divides N: every batch has BATCH seeds
BATCHES = 50  # two and a half epochs


def _data():
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, N, (2, E), generator=g)
    et = torch.randint(0, RELATIONS, (E,), generator=g)
    nt = torch.randint(0, NODE_TYPES, (N,), generator=g)
    graph = ss.Graph.from_edge_index(ei, num_nodes=N, edge_type=et, num_edge_types=RELATIONS, node_type=nt,
                                     num_node_types=NODE_TYPES)
    x = torch.randn(N, F_IN, dtype=DT, generator=g)
    y = torch.randint(0, CLASSES, (N,), generator=g)
    return graph, x, y


class TwoLayers(torch.nn.Module):
    def __init__(self, conv1, conv2):
        super().__init__()
        self.conv1, self.conv2 = conv1, conv2

    def forward(self, block0, block1, x, y):
        h = F.relu(self.conv1(block0, x))
        return F.cross_entropy(self.conv2(block1, h), y)


MODELS = {
    "sage": lambda: TwoLayers(snn.SAGEConv(F_IN, 8), snn.SAGEConv(8, CLASSES)),
    "gat": lambda: TwoLayers(snn.GATConv(F_IN, 4, heads=2), snn.GATConv(8, CLASSES)),
    "rgcn": lambda: TwoLayers(snn.RGCNConv(F_IN, 8, RELATIONS, aggr="mean"),
                              snn.RGCNConv(8, CLASSES, RELATIONS, num_bases=2)),
    "rgcn_per_edge_add": lambda: TwoLayers(snn.RGCNConv(F_IN, 8, RELATIONS, aggr="add", mode="per_edge"),
                                           snn.RGCNConv(8, CLASSES, RELATIONS, mode="per_pair")),
    "rgcn_per_run": lambda: TwoLayers(snn.RGCNConv(F_IN, 8, RELATIONS, aggr="mean", mode="per_run"),
                                      snn.RGCNConv(8, CLASSES, RELATIONS, mode="per_run")),
    "hgt": lambda: TwoLayers(snn.HGTConv(F_IN, 8, NODE_TYPES, RELATIONS, heads=2),
                             snn.HGTConv(8, CLASSES, NODE_TYPES, RELATIONS, mode="per_edge")),
    "hetero": lambda: TwoLayers(snn.HeteroConv({0: snn.GCNConv(F_IN, 8), 2: snn.SAGEConv(F_IN, 8)}),
                                snn.HeteroConv({1: snn.GATConv(8, CLASSES)}, aggr="mean")),
}


class CountingBackend:
    """aot_eager (Dynamo, the ops' fake implementations, AOTAutograd), counting its graphs."""

    def __init__(self):
        self.compiles = 0

    def __call__(self, gm, example_inputs):
        from functorch.compile import nop
        from torch._dynamo.backends.common import aot_autograd
        self.compiles += 1
        return aot_autograd(fw_compiler=nop, bw_compiler=nop)(gm, example_inputs)


def compiles(fn) -> int:
    """How many times torch compiled ``fn``: its entries in Dynamo's cache. (A backend may be called
    more often: with ``dynamic=True`` Dynamo restarts a compile once to specialise the float
    attributes of modules, such as a dropout rate, as it does for any model.)"""
    return len(torch._dynamo.eval_frame._debug_get_cache_entry_list(fn.__code__))


def _grads(model):
    # (a parameter a layer option leaves unused, such as HGT's skip gate without a residual, has none)
    return {n.removeprefix("_orig_mod."): p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def train_side_by_side(compiled, eager, loader, batches: int, tol=TOL, device=None) -> None:
    """``batches`` steps of both models on the loader's batches (epoch after epoch): the loss and
    every gradient equal batch by batch; the batches differ in size; one compile, no graph break."""
    sizes, done = set(), 0
    while done < batches:
        for batch in loader:
            if done == batches:
                break
            b0, b1 = batch.blocks
            assert device is None or batch.x.device == device
            sizes.add((b0.num_src, b0.num_dst, b0.num_edges, b1.num_edges))
            losses = []
            for m in (compiled, eager):
                m.zero_grad()
                loss = m(b0, b1, batch.x, batch.y)
                loss.backward()
                losses.append(loss.detach())
            torch.testing.assert_close(losses[0], losses[1], **tol)
            gc, ge = _grads(compiled), _grads(eager)
            assert gc.keys() == ge.keys()
            for k in ge:
                torch.testing.assert_close(gc[k], ge[k], **tol, msg=f"batch {done}: {k}")
            done += 1
    assert len(sizes) > batches // 2, "the batches should differ in size"
    assert compiles(TwoLayers.forward) == 1
    assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])


@pytest.mark.parametrize("dynamic", [None, True], ids=["dynamic_none", "dynamic_true"])
@pytest.mark.parametrize("name", list(MODELS))
def test_loader_training_compiles_once_and_equals_eager(name, dynamic):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    graph, x, y = _data()
    torch.manual_seed(0)
    eager = MODELS[name]().to(DT)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend=CountingBackend())
    loader = NeighborLoader((graph, x, y), [4, 3], batch_size=BATCH, prefetch=0, seed=1)
    train_side_by_side(compiled, eager, loader, BATCHES)


def test_full_graph_model_on_a_second_graph():
    """A transductive model compiled on one graph and applied to another: the second graph of
    another size compiles once more (torch's dynamic compile), a third none, and all equal eager."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = snn.GATConv(F_IN, 3, heads=2).to(DT)
    model = copy.deepcopy(eager)
    backend = CountingBackend()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    gen = torch.Generator().manual_seed(3)
    for n, e in ((50, 300), (80, 500), (65, 420)):
        graph = ss.Graph.from_edge_index(torch.randint(0, n, (2, e), generator=gen), num_nodes=n)
        x = torch.randn(n, F_IN, dtype=DT, generator=gen)
        out_c, out_e = compiled(graph, x), eager(graph, x)
        torch.testing.assert_close(out_c, out_e, **TOL)
        w = torch.randn(out_e.shape, dtype=DT, generator=gen)
        (out_c * w).sum().backward()
        (out_e * w).sum().backward()
        for (k, p), q in zip(model.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, **TOL, msg=k)
    assert compiles(snn.GATConv.forward) == 2


class SageGat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = snn.SAGEConv(F_IN, 8), snn.GATConv(8, CLASSES, heads=2, concat=False)

    def forward(self, block0, block1, x):
        return self.conv2(block1, F.relu(self.conv1(block0, x)))


def _exported_sage_gat(seed: int):
    """SageGat in eval mode, exported with its blocks as arguments (every size symbolic) on the
    first batch of a loader, and the loader's further batches."""
    graph, x, y = _data()
    torch.manual_seed(0)
    model = SageGat().to(DT).eval()
    batches = iter(NeighborLoader((graph, x, y), [4, 3], batch_size=BATCH, prefetch=0, seed=seed))
    first = next(batches)
    b0, b1 = first.blocks
    with torch.no_grad():
        program = torch.export.export(model, (b0, b1, first.x),
                                      dynamic_shapes=(b0.dynamic_shapes(), b1.dynamic_shapes(), {0: torch.export.Dim.AUTO}))
    return model, program, batches


def test_export_with_the_graph_as_an_argument_saves_loads_and_runs_new_blocks():
    """torch.export of a model that takes its blocks as arguments, every size symbolic
    (``Graph.dynamic_shapes``); the program, and the one torch.export.save / load give back, run
    blocks of other sizes equal to the eager model."""
    import io
    model, program, batches = _exported_sage_gat(seed=2)
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert {"seastar.vertex_program.default", "seastar.derived_graph.default"} <= ops
    assert "seastar.graph_tensor.default" not in ops  # nothing of the first blocks is a constant
    buf = io.BytesIO()
    torch.export.save(program, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    sizes = set()
    for i, batch in enumerate(batches):
        if i == 6:
            break
        blocks = batch.blocks
        sizes.add(tuple(b.num_edges for b in blocks))
        with torch.no_grad():
            want = model(*blocks, batch.x)
            torch.testing.assert_close(program.module()(*blocks, batch.x), want, **TOL)
            torch.testing.assert_close(loaded.module()(*blocks, batch.x), want, **TOL)
    assert len(sizes) > 1


class TwoRgcn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = snn.RGCNConv(F_IN, 8, RELATIONS, aggr="mean", mode="per_run")
        self.conv2 = snn.RGCNConv(8, CLASSES, RELATIONS)  # auto: per_run in compiled and exported code

    def forward(self, block0, block1, x):
        return self.conv2(block1, F.relu(self.conv1(block0, x)))


def test_export_of_rgcn_per_run_on_typed_blocks_saves_loads_and_runs_new_blocks():
    """R-GCN's per-run path exported with typed blocks as arguments (its ops find the run plans
    the blocks' graphs keep when they run): the program and the loaded one equal eager on blocks
    of other sizes."""
    import io
    graph, x, y = _data()
    torch.manual_seed(0)
    model = TwoRgcn().to(DT).eval()
    batches = iter(NeighborLoader((graph, x, y), [4, 3], batch_size=BATCH, prefetch=0, seed=4))
    first = next(batches)
    b0, b1 = first.blocks
    with torch.no_grad():
        program = torch.export.export(model, (b0, b1, first.x),
                                      dynamic_shapes=(b0.dynamic_shapes(), b1.dynamic_shapes(), {0: torch.export.Dim.AUTO}))
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert "seastar.rgcn_per_run.default" in ops
    buf = io.BytesIO()
    torch.export.save(program, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    sizes = set()
    for _, batch in zip(range(5), batches):
        with torch.no_grad():
            want = model(*batch.blocks, batch.x)
            torch.testing.assert_close(program.module()(*batch.blocks, batch.x), want, **TOL)
            torch.testing.assert_close(loaded.module()(*batch.blocks, batch.x), want, **TOL)
        sizes.add(tuple(b.num_edges for b in batch.blocks))
    assert len(sizes) > 1 and model.conv1.last_mode == "per_run"


LOAD_AND_RUN = """
import sys, torch
import seastar  # registers the ops, the graph's flattening and the programs' modules
program = torch.export.load(sys.argv[1])
cases = torch.load(sys.argv[2], weights_only=False)
for blocks, x, want in cases:
    with torch.no_grad():
        got = program.module()(*blocks, x)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
print("ran", len(cases), "blocks")
"""


def test_an_exported_program_runs_in_another_process(tmp_path):
    """torch.export.save here, torch.export.load and new blocks in a fresh process: the program
    names its vertex programs by module and name, and the other process makes their signatures
    again from that (the eager results, computed here, travel with the blocks)."""
    model, program, batches = _exported_sage_gat(seed=3)
    with torch.no_grad():
        cases = [(list(b.blocks), b.x, model(*b.blocks, b.x)) for b, _ in zip(batches, range(3))]
    assert len({tuple(b.num_edges for b in c[0]) for c in cases}) > 1  # blocks of other sizes than the export's
    torch.export.save(program, tmp_path / "program.pt2")
    torch.save(cases, tmp_path / "cases.pt")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(ss.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, str(tmp_path / "program.pt2"), str(tmp_path / "cases.pt")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ran 3 blocks" in r.stdout


def test_a_program_without_a_module_level_name_is_refused_in_another_process():
    from seastar import torch_ops
    key = json.dumps({"uid": 10 ** 9, "kind": [0, 0, 0, 0, 0], "metas": [], "backend": "auto"})
    with pytest.raises(RuntimeError, match="defined inside a function"):
        torch_ops._signature_of(key)
    key = json.dumps({"address": ["seastar.nn._programs", "no_such_program"], "kind": [0, 0, 0, 0, 0], "metas": [],
                      "backend": "auto"})
    with pytest.raises(RuntimeError, match="does not define"):
        torch_ops._signature_of(key)
